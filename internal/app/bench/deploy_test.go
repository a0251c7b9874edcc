package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/tier"
)

// TestDeploymentsShort is scenarios (a) and (b) in short form, through
// llmsim over HTTP, embedded NATS and redis-server: three deployments at
// 900/600/300 requests a minute behind one model serve at their sum
// without a 429; killing the largest mid-run fails no example and changes
// no answer, and the others keep the capacity left busy.
//
// Not parallel: the package's other rigs would share its two cores, and
// the quota ratio measures whether the machine keeps the quotas busy.
func TestDeploymentsShort(t *testing.T) {
	tier.Servers(t, "clusters")
	sc := Deployments()
	sc.Dataset = "../../../examples/demo"
	sc.Examples, sc.Votes, sc.RPM = 48, 4, []int{900, 600, 300}
	sc.FirstTokenMS, sc.TokensPerSecond = 20, 0
	sc.Generators, sc.GeneratorConcurrency, sc.Explorers, sc.ExplorerConcurrency = 2, 8, 1, 8
	sc.KillAfterSeconds, sc.KillSeconds, sc.CooldownSeconds = 4, 5, 1
	var progress bytes.Buffer
	rep, err := RunDeployments(context.Background(), sc, t.TempDir(), &progress)
	t.Log(progress.String())
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]DeployRun{"(a)": rep.A, "(b)": rep.B} {
		if r.Examples != sc.Examples || r.Failed != 0 {
			t.Errorf("%s: %d examples, %d failed; want %d, 0", name, r.Examples, r.Failed, sc.Examples)
		}
		// 429s and the quota ratio depend on the machine's load (a call
		// admitted by the limiter can reach the simulator late, bunched
		// with others): the bench measures them; here they are logged.
		t.Logf("%s: %d 429s, quota ratio %.3f over the capacity up", name, r.RateLimited, r.QuotaRatio)
		for i, n := range r.Served {
			// Its quota over the run, plus the simulator's one-second burst.
			limit := float64(sc.RPM[i])/60*r.Wall + float64(sc.RPM[i])/60
			if n == 0 || float64(n) > limit {
				t.Errorf("%s: deployment %d served %d calls in %.1fs; want some, at most its quota's %.0f (served %v)", name, i+1, n, r.Wall, limit, r.Served)
			}
		}
	}
	if rep.B.KilledSeconds < sc.KillSeconds/2 {
		t.Errorf("(b): the deployment was down %.1fs, want about %gs (the run ended first?)", rep.B.KilledSeconds, sc.KillSeconds)
	}
	// The progress line says a deployment cooled down once it was killed.
	if _, afterKill, ok := strings.Cut(progress.String(), "killing deployment-1"); !ok || !strings.Contains(afterKill, "deployment cooldown") {
		t.Errorf("(b): the progress lines after the kill never say a deployment cooled down")
	}
	if !rep.SameAnswers {
		t.Errorf("(b) answered differently from (a): %v", rep.Differing)
	}
}
