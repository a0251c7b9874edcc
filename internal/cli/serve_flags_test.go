package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeTenantLimitNamesKnownTenant: --tenant-limit for a tenant that
// has no key is an error naming it (a misspelling would leave the real
// tenant on the defaults), and one for a known tenant is applied.
func TestServeTenantLimitNamesKnownTenant(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("analytics:ak_0123456789abcdef\nfinance:fk_0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit, wantErr string
	}{
		{"analytics=30/2000000", ""},
		{"analytic=30/2000000", `no tenant "analytic"`},
		{"Finance=1/0", `no tenant "Finance"`},
	} {
		f, err := parseServeFlags(true, "--api-keys", keys, "--tenant-limit", tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		tenants, err := f.tenants()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.limit, err)
		case tc.wantErr == "" && tenants.LimitsOf("analytics").RequestsPerMinute != 30:
			t.Errorf("%s: analytics' limits are %+v", tc.limit, tenants.LimitsOf("analytics"))
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "analytics, finance")):
			t.Errorf("%s: error %v, want one naming %s and the tenants", tc.limit, err, tc.wantErr)
		}
	}
}
