package netcut_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/netcut"
)

// echo serves a line echo on a loopback port; it closes a connection
// once the client has finished writing.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("writing %q: %v", line, err)
	}
	expect(t, c, r, line)
}

func expect(t *testing.T, c net.Conn, r *bufio.Reader, line string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := r.ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("read %q (%v), want %q", got, err, line)
	}
}

// silent checks that nothing arrives on c for a while and that c is not
// closed (a blackhole, not a reset or an end).
func silent(t *testing.T, c net.Conn, r *bufio.Reader, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	got, err := r.ReadString('\n')
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: read %q (%v), want nothing and the connection open", what, got, err)
	}
}

func TestCutBlackholesAndHealDelivers(t *testing.T) {
	p := netcut.Start(t, netcut.Config{Target: echo(t)})

	open, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	ro := bufio.NewReader(open)
	roundTrip(t, open, ro, "before")

	p.Cut()
	if _, err := open.Write([]byte("during\n")); err != nil {
		t.Fatalf("a write into a cut link failed (%v): a blackhole accepts it", err)
	}
	silent(t, open, ro, "an open connection while cut")
	// A new connection is accepted but reaches nothing.
	fresh, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dialing a cut proxy: %v", err)
	}
	defer fresh.Close()
	rf := bufio.NewReader(fresh)
	if _, err := fresh.Write([]byte("new\n")); err != nil {
		t.Fatal(err)
	}
	silent(t, fresh, rf, "a connection made while cut")
	// A client ending its side during the cut: the end is delivered after
	// its bytes, on Heal.
	ending, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer ending.Close()
	re := bufio.NewReader(ending)
	if _, err := ending.Write([]byte("last\n")); err != nil {
		t.Fatal(err)
	}
	ending.(*net.TCPConn).CloseWrite()
	silent(t, ending, re, "a connection ended while cut")

	p.Heal()
	expect(t, open, ro, "during")
	roundTrip(t, open, ro, "after")
	expect(t, fresh, rf, "new")
	roundTrip(t, fresh, rf, "fresh after")
	expect(t, ending, re, "last")
	ending.SetReadDeadline(time.Now().Add(10 * time.Second))
	if rest, err := re.ReadString('\n'); err != io.EOF {
		t.Fatalf("after the ended connection's bytes: read %q (%v), want the echo server's end (EOF)", rest, err)
	}

	// Cut and heal again on the same connection.
	p.Cut()
	open.Write([]byte("again\n"))
	silent(t, open, ro, "the second cut")
	p.Heal()
	expect(t, open, ro, "again")

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	open.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := ro.ReadString('\n'); err == nil {
		t.Fatal("a connection through a closed proxy still reads")
	}
}

// Close returns while connections are blackholed (its goroutines end).
func TestCloseWhileCut(t *testing.T) {
	p := netcut.New(netcut.Config{Target: echo(t)})
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("held\n"))
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s with a connection cut")
	}
}
