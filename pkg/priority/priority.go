// Package priority marks work a user is waiting for (a question asked of
// quorum serve) apart from batch work, so the layers it passes through can
// favour it: the LLM quota keeps a share of each burst for it, and the LLM
// client gives up on a failing endpoint sooner, so the user hears why
// within seconds rather than after minutes of retries.
package priority

import "context"

type interactiveKey struct{}

// Interactive marks ctx as serving a waiting user.
func Interactive(ctx context.Context) context.Context {
	return context.WithValue(ctx, interactiveKey{}, true)
}

// IsInteractive reports whether ctx was marked Interactive.
func IsInteractive(ctx context.Context) bool {
	v, _ := ctx.Value(interactiveKey{}).(bool)
	return v
}
