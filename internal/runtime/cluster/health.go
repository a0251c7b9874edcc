package cluster

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// DeploymentHealth is what this process heard of its LLM deployments'
// health: the cooldowns its calls caused, and which deployments are down
// now. A cooldown is cluster-wide (in Redis); a process hears of the ones
// its own calls ran into, which in `quorum run` are all of them. The run's
// progress line says it, so a user sees why the run slowed.
type DeploymentHealth struct {
	mu        sync.Mutex
	until     map[string]time.Time
	cooldowns int
	now       func() time.Time
}

// NewDeploymentHealth returns an empty record.
func NewDeploymentHealth() *DeploymentHealth {
	return &DeploymentHealth{until: map[string]time.Time{}, now: time.Now}
}

// Set records a deployment cooled down for d, or healthy again (d 0).
func (h *DeploymentHealth) Set(endpoint, model string, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := endpoint + "/" + model
	if d <= 0 {
		delete(h.until, key)
		return
	}
	h.cooldowns++
	h.until[key] = h.now().Add(d)
}

// Summary is one clause for the progress line: the cooldowns so far and
// the deployments down now ("" when there was none).
func (h *DeploymentHealth) Summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cooldowns == 0 {
		return ""
	}
	now := h.now()
	var down []string
	for k, u := range h.until {
		if left := u.Sub(now); left > 0 {
			down = append(down, fmt.Sprintf("%s (%s)", k, (left+time.Second-1).Truncate(time.Second)))
		}
	}
	sort.Strings(down)
	s := fmt.Sprintf("%d deployment cooldowns", h.cooldowns)
	if h.cooldowns == 1 {
		s = "1 deployment cooldown"
	}
	if len(down) > 0 {
		s += ", down now: " + strings.Join(down, ", ")
	}
	return s
}
