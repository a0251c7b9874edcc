package llm

// Defaulted is cfg with the defaults New fills in.
func Defaulted(cfg Config) Config {
	if cfg.Default.Name == "" {
		cfg.Default.Name = "gpt-4o"
	}
	c, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return c.cfg
}

// The interactive caps, for the arithmetic over the defaults.
const (
	InteractiveHeaderTimeout = interactiveHeaderTimeout
	InteractiveDeadTimeout   = interactiveDeadTimeout
	InteractiveBackoff       = interactiveBackoff
)
