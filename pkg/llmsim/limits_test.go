package llmsim

import "testing"

// TestSilentLimits: a provider states its limits in x-ratelimit-* headers
// on every answer and 429, unless Silent; either way it refuses what is
// over them.
func TestSilentLimits(t *testing.T) {
	t.Parallel()
	for _, silent := range []bool{false, true} {
		p := newProviderLimits(Limits{RequestsPerMinute: 60, TokensPerMinute: 6000, Silent: silent})
		release, _, hdr := p.admitRequest() // one request a second: the first fits
		if release == nil {
			t.Fatalf("silent %v: the first request was refused", silent)
		}
		release()
		_, thdr := p.admitTokens(10)
		refused, wait, rhdr := p.admitRequest()
		if refused != nil || wait <= 0 {
			t.Errorf("silent %v: a second request within the second was admitted (wait %v)", silent, wait)
		}
		for _, h := range []map[string]string{hdr, thdr, rhdr} {
			if stated := h["X-Ratelimit-Limit-Requests"] != "" || h["X-Ratelimit-Limit-Tokens"] != ""; stated == silent {
				t.Errorf("silent %v: headers %v", silent, h)
			}
		}
	}
}
