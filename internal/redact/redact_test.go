package redact

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in, want string
		secrets  []string
	}{
		{"https://api.openai.com/v1", "https://api.openai.com/v1", nil},
		{"http://alice:s3cret@host:8000/v1", "http://***@host:8000/v1", []string{"s3cret", "alice"}},
		{"http://alice:p@ss@word@host/v1", "http://***@host/v1", []string{"p@ss", "word@", "alice"}},
		{"redis://:pw/with/slash@10.0.0.1:6379/0", "redis://***@10.0.0.1:6379/0", []string{"pw/with", "slash"}},
		{"nats://u:a@h1:4222,nats://v:b@h2:4222", "nats://***@h1:4222,nats://***@h2:4222", []string{"u:a", "v:b"}},
		{"https://h/v1?api-key=XYZ123&model=m", "https://h/v1?api-key=***&model=m", []string{"XYZ123"}},
		{"https://h/v1?sig=abc;token=def", "https://h/v1?sig=***;token=***", []string{"abc", "def"}},
		{"user:hunter2@db.example.com/warehouse", "***@db.example.com/warehouse", []string{"hunter2"}},
		{"http://%zz:pw@host/", "http://***@host/", []string{"pw"}},
		{"redis+sentinel://quorum:pw@s1:26379,s2:26379,s3:26379/mymaster/0", "redis+sentinel://***@s1:26379,s2:26379,s3:26379/mymaster/0", []string{"pw", "quorum"}},
		{"redis+sentinel://u:a,b@c/d@s1,s2/m", "redis+sentinel://***@s1,s2/m", []string{"a,b", "c/d"}},
		{"rediss+sentinel://s1:26379,s2:26379/m?sentinel_password=sp&pool_size=4", "rediss+sentinel://s1:26379,s2:26379/m?sentinel_password=***&pool_size=4", []string{"sp&"}},
		{"", "", nil},
	} {
		got := URL(tt.in)
		if got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		for _, s := range tt.secrets {
			if strings.Contains(got, s) {
				t.Errorf("URL(%q) = %q still shows %q", tt.in, got, s)
			}
		}
	}
}

func FuzzURL(f *testing.F) {
	for _, s := range []string{"http://a:b@h/p", "nats://u:p@h1,nats://u:p@h2", "x@y@z", "https://h/?token=t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := URL(s)
		// A password written as user:PASSWORD@host never survives.
		if i := strings.Index(s, "://"); i >= 0 {
			auth := s[i+3:]
			if at := strings.LastIndex(auth, "@"); at > 0 && !strings.ContainsAny(auth[:at], "/?#,") {
				if u, p, ok := strings.Cut(auth[:at], ":"); ok && len(p) > 3 && !strings.Contains(s[:i], p) && !strings.Contains(auth[at:], p) && strings.Contains(got, u+":"+p) {
					t.Errorf("URL(%q) = %q shows the password", s, got)
				}
			}
		}
	})
}
