package llm

import (
	"regexp"
	"strings"
)

var fenceOpen = regexp.MustCompile("(?m)^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[^\n]*$")

// Blocks returns the contents of the fenced blocks of the given kind ("sql",
// "json", "csv", "plaintext") in order. The kind matches case-insensitively
// and only as a whole word (```sqlite is not ```sql, unlike the reference,
// which glued "ite" onto the query). A block whose closing fence is missing
// runs to the end of the text.
func Blocks(text, kind string) []string {
	var out []string
	rest := text
	for {
		loc := fenceOpen.FindStringSubmatchIndex(rest)
		if loc == nil {
			return out
		}
		lang := rest[loc[2]:loc[3]]
		body := rest[loc[1]:]
		body = strings.TrimPrefix(body, "\n")
		end := closingFence(body)
		content := body
		next := ""
		if end >= 0 {
			content = body[:end]
			next = body[end:]
			if nl := strings.IndexByte(next, '\n'); nl >= 0 {
				next = next[nl+1:]
			} else {
				next = ""
			}
		}
		if strings.EqualFold(lang, kind) {
			out = append(out, strings.TrimSpace(content))
		}
		if end < 0 {
			return out
		}
		rest = next
	}
}

// closingFence returns the offset of the line that closes a block, or -1.
func closingFence(body string) int {
	off := 0
	for off <= len(body) {
		line := body[off:]
		if nl := strings.IndexByte(line, '\n'); nl >= 0 {
			line = line[:nl]
		}
		if strings.TrimSpace(line) == "```" {
			return off
		}
		nl := strings.IndexByte(body[off:], '\n')
		if nl < 0 {
			return -1
		}
		off += nl + 1
	}
	return -1
}
