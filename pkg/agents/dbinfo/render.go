package dbinfo

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/quorumsql/quorum/pkg/pyrepr"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

const similarPrefix = "Some other tables have the similar structure: "

// render writes one table block. keep, when not nil, restricts the columns
// (and the sample rows' fields) to the named ones, lower-cased.
func (b *Block) render(opt Options, keep map[string]bool) string {
	var s strings.Builder
	s.WriteString("Table full name: " + b.FullName + "\n")
	for _, c := range b.Columns {
		if keep != nil && !keep[strings.ToLower(c.Name)] {
			continue
		}
		s.WriteString("Column name: " + c.Name + " Type: " + c.Type)
		if opt.Descriptions && strings.TrimSpace(c.Description) != "" {
			s.WriteString(" Description: " + strings.ReplaceAll(c.Description, "\n", " "))
		}
		s.WriteByte('\n')
	}
	if opt.SampleRows {
		s.WriteString("Sample rows:\n" + b.samples(keep) + "\n")
	}
	if len(b.Members) > 0 {
		s.WriteString(similarPrefix + pyrepr.List(b.Members) + "\n")
	}
	s.WriteString("\n" + Separator + "\n")
	return s.String()
}

var binaryValue = regexp.MustCompile(`"(?:[^"\\]|\\.)*bytearray\(b(?:[^"\\]|\\.)*"`)

func (b *Block) samples(keep map[string]bool) string {
	if b.sampleRows != nil {
		return liveRows(b.sampleRows, b.Columns, keep)
	}
	if len(b.sampleJSON) == 0 {
		return "[]"
	}
	raw := b.sampleJSON
	if bytes.Contains(raw, []byte("bytearray(b")) {
		raw = binaryValue.ReplaceAll(raw, []byte(`"<binary data>"`))
	}
	if keep != nil {
		raw = filterRows(raw, keep)
	}
	out, err := pyrepr.JSON(raw)
	if err != nil {
		return "[]"
	}
	return out
}

// filterRows keeps only the kept keys of each row object, in order.
func filterRows(raw []byte, keep map[string]bool) []byte {
	var rows []json.RawMessage
	if json.Unmarshal(raw, &rows) != nil {
		return raw
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		dec := json.NewDecoder(bytes.NewReader(r))
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			b.Write(r)
			continue
		}
		b.WriteByte('{')
		first := true
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				break
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				break
			}
			k := kt.(string)
			if !keep[strings.ToLower(k)] {
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			b.Write(v)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes()
}

// liveRows renders rows read from SQLite like Python's repr of a list of
// tuples.
func liveRows(rows [][]warehouse.Value, cols []Column, keep map[string]bool) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		n := 0
		for j, v := range r {
			if keep != nil && j < len(cols) && !keep[strings.ToLower(cols[j].Name)] {
				continue
			}
			if n > 0 {
				b.WriteString(", ")
			}
			n++
			b.WriteString(valueRepr(v))
		}
		if n == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	}
	b.WriteByte(']')
	return b.String()
}

func valueRepr(v warehouse.Value) string {
	switch v.Kind {
	case warehouse.Int:
		return strconv.FormatInt(v.Int, 10)
	case warehouse.Float:
		return pyrepr.Float(v.Float)
	case warehouse.Text:
		return pyrepr.Str(v.Str)
	case warehouse.Bytes:
		return pyrepr.Bytes([]byte(v.Str))
	case warehouse.Bool:
		return pyrepr.Bool(v.Bool)
	}
	return "None"
}

var (
	sampleBlock = regexp.MustCompile(`(?s)Sample rows:(.*?)\n(-{10,})\n`)
	description = regexp.MustCompile(` ?Description:[^\n]*`)
)

// Chars is the size measure of prompts: characters (code points), as the
// reference counted them.
func Chars(s string) int { return utf8.RuneCountInString(s) }

// shrinkSamples is the first oversize rule on one rendered block: its
// sample rows are cut to 10,000 characters, or 1,000 when they are mostly
// digits. Unlike the reference, the family hint that follows the sample
// rows is kept.
func shrinkSamples(block string) string {
	return sampleBlock.ReplaceAllStringFunc(block, func(m string) string {
		sub := sampleBlock.FindStringSubmatch(m)
		content, dashes := sub[1], sub[2]
		hint := ""
		if i := strings.LastIndex(content, "\n"+similarPrefix); i >= 0 {
			content, hint = content[:i], content[i:]
		}
		limit := 10_000
		if digitRatio(content) < 0.3 {
			limit = 1_000
		}
		content = truncateChars(content, limit)
		return "Sample rows:" + content + hint + "\n" + dashes + "\n"
	})
}

// applyOversize shrinks the blocks of a prompt over the threshold, as the
// reference did to the whole text: when the blocks together exceed it,
// every block's sample rows are shrunk; if they are still over and
// ClearLongDescriptions is set, descriptions go. Each rule is decided on
// the whole and applied block by block (both are block-local edits), so
// the blocks stay addressable: schema linking shows the model each block
// as it appears in the prompt, as the reference's linking read its blocks
// from prompts.txt.
func applyOversize(blocks []string, opt Options) {
	total := func() int {
		n := 0
		for _, b := range blocks {
			n += Chars(b)
		}
		return n
	}
	if opt.Threshold <= 0 || total() <= opt.Threshold {
		return
	}
	for i, b := range blocks {
		blocks[i] = shrinkSamples(b)
	}
	if opt.ClearLongDescriptions && total() > opt.Threshold {
		for i, b := range blocks {
			blocks[i] = description.ReplaceAllString(b, "")
		}
	}
}

// digitRatio is 1 - digits/non-space characters over the first 10,000
// characters; below 0.3 the text is more than 70% digits.
func digitRatio(s string) float64 {
	s = truncateChars(s, 10_000)
	digits, nonSpace := 0, 0
	for _, r := range s {
		if unicode.IsSpace(r) {
			continue
		}
		nonSpace++
		if r >= '0' && r <= '9' {
			digits++
		}
	}
	if nonSpace == 0 {
		return 1
	}
	return 1 - float64(digits)/float64(nonSpace)
}

func truncateChars(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// render writes the blocks and applies the oversize rules.
func (i *Info) render() {
	texts := make([]string, len(i.Blocks))
	for j, bl := range i.Blocks {
		texts[j] = bl.render(i.opt, bl.keep)
	}
	applyOversize(texts, i.opt)
	if i.opt.Structural {
		texts = i.collapse(texts)
	}
	i.blockTexts = texts
	i.Tables = strings.Join(texts, "")
}

// BlockText is block j as the prompt shows it (after the oversize rules),
// without its closing separator: the reference's linking split prompts.txt
// on the separator and asked about each stripped chunk.
func (i *Info) BlockText(j int) string {
	t := ""
	if len(i.blockTexts) == len(i.Blocks) {
		t = i.blockTexts[j]
	} else {
		t = i.Blocks[j].render(i.opt, i.Blocks[j].keep)
	}
	return strings.TrimSpace(strings.TrimSuffix(t, Separator+"\n"))
}
