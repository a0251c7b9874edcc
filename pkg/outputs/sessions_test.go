package outputs

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// resumedReport is sampleReport run in three sessions: 10 minutes, a
// pause of an hour, 5 minutes (its process killed), a pause of a day,
// 20 minutes.
func resumedReport() *Report {
	r := sampleReport()
	t0 := r.Started
	r.Sessions = []Session{
		{Number: 1, Started: t0, Finished: t0.Add(10 * time.Minute), Seconds: 600, Examples: 4},
		{Number: 2, Started: t0.Add(70 * time.Minute), Finished: t0.Add(75 * time.Minute), Seconds: 300, Examples: 3, EndUnknown: true},
		{Number: 3, Started: t0.Add(24*time.Hour + 75*time.Minute), Finished: t0.Add(24*time.Hour + 95*time.Minute), Seconds: 1200, Examples: 5},
	}
	r.Finished = r.Sessions[2].Finished
	r.Summarize()
	return r
}

// TestWallTimeIsTheSumOfSessions: a resumed run's wall time is its
// sessions' sum and its span runs from the first start to the last end;
// without sessions both are Finished − Started, as before. Both survive
// run.json.
func TestWallTimeIsTheSumOfSessions(t *testing.T) {
	t.Parallel()
	r := resumedReport()
	wantSpan := (24*time.Hour + 95*time.Minute).Seconds()
	if r.Totals.WallSeconds != 2100 || r.Totals.SpanSeconds != wantSpan {
		t.Errorf("wall %v s, span %v s; want 2100 s (600+300+1200) and %v s", r.Totals.WallSeconds, r.Totals.SpanSeconds, wantSpan)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Totals.WallSeconds != 2100 || back.Totals.SpanSeconds != wantSpan || len(back.Sessions) != len(r.Sessions) {
		t.Fatalf("read back wall %v, span %v, %d sessions; want 2100, %v, %d", back.Totals.WallSeconds, back.Totals.SpanSeconds, len(back.Sessions), wantSpan, len(r.Sessions))
	}
	for i, s := range back.Sessions {
		w := r.Sessions[i]
		if s.Number != w.Number || !s.Started.Equal(w.Started) || !s.Finished.Equal(w.Finished) || s.Seconds != w.Seconds ||
			s.Examples != w.Examples || s.EndUnknown != w.EndUnknown {
			t.Errorf("session read back %+v, want %+v", s, w)
		}
	}

	one := sampleReport() // 95 s, no sessions
	if one.Totals.WallSeconds != 95 || one.Totals.SpanSeconds != 95 {
		t.Errorf("a report without sessions: wall %v s, span %v s, want 95 and 95", one.Totals.WallSeconds, one.Totals.SpanSeconds)
	}
}

// TestRunningSecondsLeavesPausesOut: a finish time maps to the time the
// run had been running, each pause before it left out; one in a pause
// maps to the end of the session before.
func TestRunningSecondsLeavesPausesOut(t *testing.T) {
	t.Parallel()
	r := resumedReport()
	for _, tc := range []struct{ at, want float64 }{
		{0, 0},
		{300, 300},                          // in session 1
		{600, 600},                          // its end
		{(30 * time.Minute).Seconds(), 600}, // the first pause
		{(72 * time.Minute).Seconds(), 720}, // session 2, 2 min in
		{(24*time.Hour + 85*time.Minute).Seconds(), 600 + 300 + 600}, // session 3, 10 min in
	} {
		if got := runningSeconds(r, tc.at); got != tc.want {
			t.Errorf("%v s after the start: %v s of running, want %v", tc.at, got, tc.want)
		}
	}
	one := sampleReport()
	if got := runningSeconds(one, 42); got != 42 {
		t.Errorf("a run of one session: 42 s after its start maps to %v, want 42", got)
	}
}

// TestReportShowsSessions: report.html names a resumed run's wall time as
// its sessions' sum beside the span, lists each session (the killed one
// flagged) and charts throughput against running time; a run of one
// session shows neither the table nor the labels.
func TestReportShowsSessions(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := WriteHTML(&b, resumedReport(), nil); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<section id="sessions"><h2>Sessions (3)</h2>`,
		"<th>wall time (sum of its 3 sessions)</th><td>35m 00s</td>",
		"<th>span (first start to last end, pauses included)</th><td>25h 35m</td>",
		"(last seen: its process died)",
		"<td>10m 00s</td><td>4</td>", "<td>5m 00s</td><td>3</td>", "<td>20m 00s</td><td>5</td>",
		">seconds of running (pauses between sessions left out)</text>",
		" in 3 sessions</p>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the resumed run's report lacks %q", want)
		}
	}
	b.Reset()
	if err := WriteHTML(&b, sampleReport(), nil); err != nil {
		t.Fatal(err)
	}
	page = b.String()
	for _, absent := range []string{`id="sessions"`, "sum of its", "span (first start"} {
		if strings.Contains(page, absent) {
			t.Errorf("a run of one session's report shows %q", absent)
		}
	}
	if !strings.Contains(page, "<th>wall time</th><td>1m 35s</td>") {
		t.Error("a run of one session's report lacks its wall time, 1m 35s")
	}
}
