package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/service"
)

// Stage orders a process's components at shutdown: the components of one
// stage stop together, and each stage once the one before has stopped.
type Stage int

const (
	// Intake takes new work in: serve's question API, the health and
	// metrics listener, the live schema refresher.
	Intake Stage = iota
	// Workers are the generator and explorer workers.
	Workers
	// Deciders turn the workers' results into rounds and answers: the
	// voter, and serve's question drivers (coordinators).
	Deciders
	stages
)

var stageNames = [stages]string{"intake", "workers", "deciders"}

// Add starts s with the process's components' context and stops it at
// Close in its stage, after those added to the same stage later.
func (c *Cluster) Add(st Stage, s service.Service) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("cluster: closed")
	}
	if err := s.Start(c.ctx); err != nil {
		return err
	}
	c.components[st] = append(c.components[st], s)
	return nil
}

// Defer runs f at Close once every component has stopped, before the
// connections close (a file the components wrote to, say); the last
// deferred runs first.
func (c *Cluster) Defer(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deferred = append(c.deferred, f)
}

// Wait returns when ctx ends (nil) or when a role of the process ended by
// itself (its error): the role binaries serve until then.
func (c *Cluster) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-c.watch.failed:
		return c.watch.failure
	}
}

// Close stops the process, in the one order every process stops in:
//
//  1. intake: the listeners and serve's question API stop taking new work;
//  2. workers: the generator and explorer workers stop taking tasks and let
//     those in flight finish within the grace period, handing the rest
//     back to the queue;
//  3. deciders: the voter records what the workers published, serve's
//     question drivers stop (a question in flight stays pending for the
//     next driver);
//  4. what was deferred (files the components wrote), then the
//     warehouses the process opened and the LLM client's connections;
//  5. the NATS connection drains and closes;
//  6. the Redis client closes;
//  7. the servers the process started: redis-server (flushing its
//     append-only file), then the embedded NATS server.
//
// Each stage waits for its components' goroutines; one that has not
// stopped within the grace period and 10 s is reported and left behind,
// and the connections close under it. Close may be called more than once.
func (c *Cluster) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	if c.watch != nil {
		c.watch.Stop()
	}
	for st := range stages {
		c.stopStage(st)
	}
	c.cancel()
	for i := len(c.deferred) - 1; i >= 0; i-- {
		c.deferred[i]()
	}
	if c.Env != nil {
		c.Env.Close()
	}
	if c.llm != nil {
		c.llm.Close()
	}
	if c.exporter != nil {
		// The spans still batched go out before the process ends.
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := c.exporter.Shutdown(sctx); err != nil {
			c.log.Warn("exporting the last spans", zap.Error(err))
		}
		cancel()
	}
	if c.queue != nil {
		c.queue.Close()
	}
	if c.Redis != nil {
		_ = c.Redis.Close()
	}
	if c.redisServer != nil {
		c.redisServer.Stop()
	}
	if c.natsServer != nil {
		c.natsServer.Shutdown()
	}
}

// stopStage stops a stage's components together and waits for them.
func (c *Cluster) stopStage(st Stage) {
	ss := c.components[st]
	if len(ss) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Stop()
		}()
	}
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(stopped)
	}()
	within := c.grace + 10*time.Second
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		c.log.Error("components did not stop in time; closing the connections under them",
			zap.String("stage", stageNames[st]), zap.Duration("waited", within))
	}
}
