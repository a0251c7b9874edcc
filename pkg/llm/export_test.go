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

// WireBytes is the most the client reads of a 2xx response to a request
// whose completion is bounded by maxTokens.
func WireBytes(maxTokens int, stream bool) int64 { return wireBytes(maxTokens, stream) }
