// Package netcut is a loopback TCP proxy that a test can partition: Cut
// stops every byte both ways on every open connection without closing
// any (a dropped link, not a reset), and new connections are accepted but
// reach nothing; Heal delivers again.
//
// A healed link delivers what was written while it was down, in order,
// as TCP's retransmissions would: each direction's bytes are read off the
// sender's socket into a buffer while cut (so the sender's writes succeed,
// as they do into a kernel's send buffer) and forwarded on Heal. A close
// during the cut is delivered after the buffered bytes, as a retransmitted
// FIN would be; a connection accepted during the cut dials the target only
// on Heal, as a retransmitted SYN would. So a client that gave up on a
// request during the partition may still have it executed after: the
// network's real behaviour, which the system under test must survive.
package netcut

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
)

// Config says where the proxy forwards to.
type Config struct {
	// Target is the host:port every accepted connection is forwarded to.
	Target string
}

// Proxy listens on a loopback port and forwards to Config.Target.
type Proxy struct {
	cfg Config
	ln  net.Listener

	mu     sync.Mutex
	cond   *sync.Cond // signalled on every change below or to a pipe
	cut    bool
	closed bool
	conns  map[net.Conn]struct{}

	wg sync.WaitGroup
}

// pipe is one direction of one connection: bytes read from the sender and
// not yet written to the receiver, and whether the sender has finished.
// Guarded by Proxy.mu.
type pipe struct {
	buf []byte
	eof bool
}

// New returns a proxy to cfg.Target; Start opens its port.
func New(cfg Config) *Proxy {
	p := &Proxy{cfg: cfg, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// Start listens on a free loopback port and begins accepting.
func (p *Proxy) Start() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("netcut: listening for %s: %w", p.cfg.Target, err)
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept()
	return nil
}

// Start starts a proxy to cfg.Target, closed at the test's cleanup.
func Start(t testing.TB, cfg Config) *Proxy {
	t.Helper()
	p := New(cfg)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr is the proxy's host:port, to give clients instead of the target's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut partitions the link: nothing is forwarded either way until Heal.
func (p *Proxy) Cut() { p.set(true) }

// Heal ends the partition: what was written meanwhile is delivered.
func (p *Proxy) Heal() { p.set(false) }

func (p *Proxy) set(cut bool) {
	p.mu.Lock()
	p.cut = cut
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Close stops accepting, closes every connection both sides and waits for
// the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// track registers c to be closed by Close; false if the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve forwards one client connection. The client's bytes are buffered at
// once; the target is dialed only while the link is up.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	up, down := &pipe{}, &pipe{}
	p.wg.Add(1)
	go p.read(client, up)

	p.mu.Lock()
	for p.cut && !p.closed {
		p.cond.Wait()
	}
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return
	}
	server, err := net.Dial("tcp", p.cfg.Target)
	if err != nil {
		p.untrack(client) // the target refused: so does the proxy
		return
	}
	if !p.track(server) {
		return
	}
	var once sync.Once
	closeBoth := func() { once.Do(func() { p.untrack(client, server) }) }
	var ends sync.WaitGroup
	ends.Add(2)
	p.wg.Add(4)
	go p.read(server, down)
	go func() { defer ends.Done(); p.write(server, up, closeBoth) }()
	go func() { defer ends.Done(); p.write(client, down, closeBoth) }()
	// Both directions finished: release the sockets.
	go func() { defer p.wg.Done(); ends.Wait(); closeBoth() }()
}

// read moves src's bytes into pp until src ends (EOF, reset or closed).
func (p *Proxy) read(src net.Conn, pp *pipe) {
	defer p.wg.Done()
	b := make([]byte, 32<<10)
	for {
		n, err := src.Read(b)
		p.mu.Lock()
		pp.buf = append(pp.buf, b[:n]...)
		if err != nil {
			pp.eof = true
		}
		p.cond.Broadcast()
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// write forwards pp to dst while the link is up; after the sender's end it
// half-closes dst, as a FIN would. A failed write ends the connection.
func (p *Proxy) write(dst net.Conn, pp *pipe, closeBoth func()) {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		for !p.closed && (p.cut || (len(pp.buf) == 0 && !pp.eof)) {
			p.cond.Wait()
		}
		if p.closed {
			p.mu.Unlock()
			return
		}
		data, eof := pp.buf, pp.eof
		pp.buf = nil
		p.mu.Unlock()
		if len(data) > 0 {
			if _, err := dst.Write(data); err != nil {
				closeBoth()
				return
			}
			continue // the end goes after any bytes read meanwhile
		}
		if eof {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}
