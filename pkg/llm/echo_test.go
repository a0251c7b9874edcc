package llm

import (
	"strings"
	"testing"
)

// TestEcho: a reply cut at the client's size bound goes back into the
// conversation as its first EchoBytes and a note; any other reply whole.
func TestEcho(t *testing.T) {
	big := strings.Repeat("é", 3<<20) // 6 MiB, two bytes a rune
	for _, tt := range []struct {
		name  string
		resp  Response
		whole bool
	}{
		{"short reply", Response{Text: "SELECT 1"}, true},
		{"long reply not cut", Response{Text: big}, true},
		{"long reply cut by the client", Response{Text: big, CutAt: len(big), FinishReason: "length"}, false},
		{"short reply cut by the client", Response{Text: "SELECT", CutAt: 6}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.resp.Echo()
			if tt.whole {
				if got != tt.resp.Text {
					t.Errorf("Echo() changed a reply it must keep whole (%d bytes → %d)", len(tt.resp.Text), len(got))
				}
				return
			}
			head, note, ok := strings.Cut(got, "\n[…")
			if !ok || len(head) > EchoBytes || !strings.HasPrefix(tt.resp.Text, head) || !strings.Contains(note, "left out") {
				t.Errorf("Echo() of a cut %d-byte reply = %d bytes (head %d, note %q); want at most %d bytes of its start and a note",
					len(tt.resp.Text), len(got), len(head), note, EchoBytes)
			}
			if m := tt.resp.Message(); m.Content != got {
				t.Errorf("Message().Content is not Echo()")
			}
		})
	}
}
