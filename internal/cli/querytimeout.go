package cli

import (
	"fmt"
	"time"
)

// defaultQueryTimeout bounds one warehouse query in run, solve, the
// cluster's coordinator and eval alike.
const defaultQueryTimeout = 60 * time.Second

const queryTimeoutUsage = "interrupt any one warehouse query (candidates, exploration, checks, evaluation) after this long; the model is told it ran too long"

func queryTimeoutError(d time.Duration) error {
	return fmt.Errorf("--query-timeout %v: give a positive duration, e.g. 60s", d)
}
