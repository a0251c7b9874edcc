package localredis_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/localredis"
	"github.com/quorumsql/quorum/internal/testutil/tier"
)

// TestDirIsPrivate: the server's folder, the append-only files it writes
// and what an older version left there with wider modes are readable by
// their owner only.
func TestDirIsPrivate(t *testing.T) {
	tier.Servers(t, "redis-server")
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "redis")
	if err := os.MkdirAll(filepath.Join(dir, "appendonlydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "left-by-an-old-version.aof")
	if err := os.WriteFile(old, []byte("*1\r\n$4\r\nPING\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := localredis.Start(localredis.Options{Dir: dir, AppendOnly: true, Password: "pw"})
	if errors.Is(err, localredis.ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	rdb := redis.NewClient(srv.ClientOptions())
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "tenant:question", "secret rows", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A rewrite creates new files, as a long run would.
	if err := rdb.BgRewriteAOF(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Stop() // flushes the append-only file
	files := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s is %v: group or others have access", p, perm)
		}
		if !d.IsDir() {
			files++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 2 {
		t.Errorf("found %d files in %s, want the old file and the server's append-only files", files, dir)
	}
}

// TestDirIsLockedWhileAServerRuns: a second server over a folder a running
// one appends to is refused (they would corrupt its append-only file);
// Running names the running server to another process, and once it stops
// (or dies) the folder is free again.
func TestDirIsLockedWhileAServerRuns(t *testing.T) {
	tier.Servers(t, "redis-server")
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "redis")
	if url, err := localredis.Running(filepath.Join(t.TempDir(), "missing")); err == nil || url != "" {
		t.Errorf("Running over a missing folder: %q, %v; want an error", url, err)
	}
	srv, err := localredis.Start(localredis.Options{Dir: dir, AppendOnly: true, Password: "pw"})
	if errors.Is(err, localredis.ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	if second, err := localredis.Start(localredis.Options{Dir: dir, AppendOnly: true}); !errors.Is(err, localredis.ErrDirInUse) {
		if second != nil {
			second.Stop()
		}
		t.Errorf("a second server over %s: %v, want ErrDirInUse", dir, err)
	}
	url, err := localredis.Running(dir)
	if err != nil || url != srv.URL() {
		t.Fatalf("Running(%s) = %q, %v; want the running server's %q", dir, url, err, srv.URL())
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Errorf("the URL Running gave does not reach the server: %v", err)
	}
	srv.Stop()
	if url, err := localredis.Running(dir); err != nil || url != "" {
		t.Errorf("after Stop, Running(%s) = %q, %v; want none", dir, url, err)
	}
	again, err := localredis.Start(localredis.Options{Dir: dir, AppendOnly: true})
	if err != nil {
		t.Fatalf("a server over the folder after the first stopped: %v", err)
	}
	again.Stop()
}
