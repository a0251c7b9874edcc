package dbinfo

import (
	"sort"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/pyrepr"
)

// DefaultEKReserve is the room a structural Info leaves for an example's
// external knowledge under Target. Spider 2.0-lite's longest external
// knowledge documents are about 20,000 characters.
const DefaultEKReserve = 30_000

// groupStructure is the structural mode's second grouping: within one
// database and schema, blocks whose columns are identical (same names and
// types, in order) are collapsed into the first, which lists every table
// of them (and of their digit families) as its members. Blocks without
// columns are left alone.
func groupStructure(blocks []*Block) []*Block {
	sig := func(b *Block) string {
		var s strings.Builder
		s.WriteString(b.DBName + "\x00" + b.Schema + "\x01")
		for _, c := range b.Columns {
			s.WriteString(strings.ToLower(c.Name) + "\x00" + c.Type + "\x00")
		}
		return s.String()
	}
	fam := map[string][]*Block{}
	for _, b := range blocks {
		if len(b.Columns) > 0 {
			k := sig(b)
			fam[k] = append(fam[k], b)
		}
	}
	var out []*Block
	for _, b := range blocks {
		if len(b.Columns) == 0 {
			out = append(out, b)
			continue
		}
		members := fam[sig(b)]
		if len(members) < 2 {
			out = append(out, b)
			continue
		}
		if members[0] != b {
			continue
		}
		all := memberNames(b)
		for _, m := range members[1:] {
			all = append(all, memberNames(m)...)
		}
		b.Members = all
		out = append(out, b)
	}
	return out
}

func memberNames(b *Block) []string {
	if len(b.Members) == 0 {
		return []string{b.Name}
	}
	return append([]string(nil), b.Members...)
}

// collapse is the structural mode's last resort, applied after the
// paper's oversize rules while the prompt is still over its target (Target
// minus the structure line and EKReserve). Each step is applied to every
// block and the next one only if the prompt is still over:
//  1. sample rows are dropped (the family hint after them stays);
//  2. column descriptions are dropped;
//  3. the largest blocks, one at a time (ties by position), are cut to
//     their table name and the list of their column names, without types;
//  4. the family hints of names-only blocks name only how many tables
//     share the structure (the structure line lists them all);
//  5. the names-only column lists of the largest blocks are cut, keeping
//     the first columns and saying how many were left out.
//
// Every step is a pure function of the blocks, so the same metadata gives
// the same prompt.
func (i *Info) collapse(texts []string) []string {
	target := i.opt.Target - len(i.Structure()) - i.opt.EKReserve - len("External knowledge that might be helpful: \n\n")
	total := func() int {
		n := 0
		for _, t := range texts {
			n += len(t)
		}
		return n
	}
	if i.opt.Target <= 0 || total() < target {
		return texts
	}
	for j, t := range texts {
		texts[j] = dropSamples(t)
	}
	if total() < target {
		return texts
	}
	for j, t := range texts {
		texts[j] = description.ReplaceAllString(t, "")
	}
	if total() < target {
		return texts
	}
	order := make([]int, len(texts))
	for j := range order {
		order[j] = j
	}
	sort.SliceStable(order, func(a, b int) bool { return len(texts[order[a]]) > len(texts[order[b]]) })
	for _, j := range order {
		if total() < target {
			return texts
		}
		texts[j] = i.Blocks[j].renderNames(false, 0)
	}
	for _, j := range order {
		if total() < target {
			return texts
		}
		texts[j] = i.Blocks[j].renderNames(true, 0)
	}
	for _, limit := range []int{200, 50, 10} {
		for _, j := range order {
			if total() < target {
				return texts
			}
			texts[j] = i.Blocks[j].renderNames(true, limit)
		}
	}
	return texts
}

// renderNames is a names-only block: the table's name and its column
// names (the first limit of them when limit > 0). short replaces the
// family hint's list by the number of tables.
func (b *Block) renderNames(short bool, limit int) string {
	var s strings.Builder
	s.WriteString("Table full name: " + b.FullName + "\n")
	var names []string
	for _, c := range b.Columns {
		if b.keep != nil && !b.keep[strings.ToLower(c.Name)] {
			continue
		}
		names = append(names, c.Name)
	}
	more := 0
	if limit > 0 && len(names) > limit {
		names, more = names[:limit], len(names)-limit
	}
	s.WriteString("Column names: " + strings.Join(names, ", "))
	if more > 0 {
		s.WriteString(", … (" + itoa(more) + " more columns)")
	}
	s.WriteByte('\n')
	if len(b.Members) > 0 {
		if short {
			s.WriteString(similarPrefix + itoa(len(b.Members)) + " tables, listed in the table structure below\n")
		} else {
			s.WriteString(similarPrefix + pyrepr.List(b.Members) + "\n")
		}
	}
	s.WriteString("\n" + Separator + "\n")
	return s.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

// dropSamples removes a rendered block's sample rows, keeping the family
// hint that follows them.
func dropSamples(block string) string {
	return sampleBlock.ReplaceAllStringFunc(block, func(m string) string {
		sub := sampleBlock.FindStringSubmatch(m)
		content, dashes := sub[1], sub[2]
		hint := ""
		if i := strings.LastIndex(content, "\n"+similarPrefix); i >= 0 {
			hint = content[i+1:] + "\n"
		}
		return hint + "\n" + dashes + "\n"
	})
}
