package sqltext

import (
	"fmt"
	"strings"
)

// Query history and account usage: on a warehouse that tenants reach
// through one identity, these views and functions show one tenant the SQL,
// and even the results, of another. The guard finds them by the
// identifiers the lexer reads (any case, quoted or not, split at dots),
// never by a substring of the raw text, so a string or a comment naming
// them counts for nothing.

// snowflakeUsageSchemas are the schemas of Snowflake's SNOWFLAKE database
// that hold the account's usage and history; any object in them is
// refused.
var snowflakeUsageSchemas = []string{"ACCOUNT_USAGE", "ORGANIZATION_USAGE", "READER_ACCOUNT_USAGE", "DATA_SHARING_USAGE"}

// snowflakeHistoryPrefixes start the names of Snowflake's history views
// and table functions (QUERY_HISTORY_BY_USER, LOGIN_HISTORY...), refused
// under INFORMATION_SCHEMA or when called.
var snowflakeHistoryPrefixes = []string{"QUERY_HISTORY", "LOGIN_HISTORY", "ACCESS_HISTORY", "TASK_HISTORY"}

// snowflakeSessionHistory are functions that read the session's earlier
// queries: a pooled session may have run another tenant's.
var snowflakeSessionHistory = []string{"RESULT_SCAN", "LAST_QUERY_ID"}

// bigQueryJobsPrefix starts BigQuery's JOBS_BY_USER, JOBS_BY_PROJECT,
// JOBS_BY_FOLDER, JOBS_BY_ORGANIZATION and JOBS_TIMELINE* views (JOBS
// itself matches whole).
var bigQueryJobsPrefix = []string{"JOBS_"}

// history returns why a statement reads query history or account usage,
// or "".
func (c *classifier) history(toks []tok) string {
	if c.d != Snowflake && c.d != BigQuery {
		return ""
	}
	for i := 0; i < len(toks); {
		t := toks[i]
		if t.kind != tokWord && t.kind != tokQuotedIdent {
			i++
			continue
		}
		if why := c.historyByString(toks, i); why != "" {
			return why
		}
		h := historyScan{d: c.d}
		next := c.nameParts(toks, i, h.part)
		h.call = next < len(toks) && toks[next].kind == tokOpenParen
		if found := h.verdict(); found != "" {
			return historyRefusal(c.sql[t.start:toks[next-1].end], found)
		}
		i = next
	}
	return ""
}

// historyByString checks Snowflake's IDENTIFIER('name') and TABLE('name')
// at toks[i], which name an object by a string literal.
func (c *classifier) historyByString(toks []tok, i int) string {
	if c.d != Snowflake || !c.isWord(toks, i, "IDENTIFIER", "TABLE") || i+2 >= len(toks) ||
		toks[i+1].kind != tokOpenParen || toks[i+2].kind != tokString {
		return ""
	}
	lit := c.text(toks[i+2])
	name := strings.TrimSuffix(strings.TrimPrefix(lit, "$$"), "$$")
	if len(name) == len(lit) && len(lit) >= 2 {
		name = lit[1 : len(lit)-1]
	}
	h := historyScan{d: c.d}
	h.call = i+4 < len(toks) && toks[i+3].kind == tokCloseParen && toks[i+4].kind == tokOpenParen
	for {
		k := strings.IndexByte(name, '.')
		if k < 0 {
			h.part(strings.Trim(name, `"`), true)
			break
		}
		h.part(strings.Trim(name[:k], `"`), false)
		name = name[k+1:]
	}
	if found := h.verdict(); found != "" {
		return historyRefusal(c.text(toks[i+2]), found)
	}
	return ""
}

func historyRefusal(name, found string) string {
	if len(name) > 80 {
		name = name[:80] + "…"
	}
	return fmt.Sprintf("the query reads %s (%s): query history and account usage show other users' queries and results, and are refused unless the operator allows them", name, found)
}

// nameParts calls part with each part of the dotted name starting at
// toks[i] (a.b.c, any part quoted; a quoted part is split at its dots too,
// as BigQuery reads `project.dataset.table`), last set for the final one,
// and returns the index of the token after the name.
func (c *classifier) nameParts(toks []tok, i int, part func(p string, last bool)) int {
	for {
		t := toks[i]
		more := c.isOther(toks, i+1, ".") && i+2 < len(toks) && (toks[i+2].kind == tokWord || toks[i+2].kind == tokQuotedIdent)
		text := c.text(t)
		if t.kind == tokQuotedIdent && len(text) >= 2 {
			text = text[1 : len(text)-1]
			for k := strings.IndexByte(text, '.'); k >= 0; k = strings.IndexByte(text, '.') {
				part(text[:k], false)
				text = text[k+1:]
			}
		}
		part(text, !more)
		if !more {
			return i + 1
		}
		i += 2
	}
}

// historyScan follows the parts of one name and remembers the first that
// reads history.
type historyScan struct {
	d Dialect
	// call: the name is called ("(" follows it).
	call bool
	prev string
	// found says what the name reads; last is the name's final part.
	found, last string
}

func (h *historyScan) part(p string, last bool) {
	p = strings.TrimSpace(p)
	if h.found == "" {
		h.found = h.reads(p, last)
	}
	h.prev = p
	if last {
		h.last = p
	}
}

// reads is what part p of a name reads of the history ("" for nothing),
// given the part before it.
func (h *historyScan) reads(p string, last bool) string {
	under := strings.EqualFold(h.prev, "INFORMATION_SCHEMA")
	switch {
	case h.d == Snowflake && !last && equalAny(p, snowflakeUsageSchemas):
		return "the account's usage and history"
	case h.d == Snowflake && under && hasPrefixAny(p, snowflakeHistoryPrefixes):
		return "the account's query history"
	case h.d == BigQuery && under && (strings.EqualFold(p, "JOBS") || hasPrefixAny(p, bigQueryJobsPrefix)):
		return "the project's job history, with every job's query"
	}
	return ""
}

// verdict is what the name reads, "" for nothing of the history: a
// history function is refused when called, however qualified.
func (h *historyScan) verdict() string {
	if h.found != "" || !h.call || h.d != Snowflake {
		return h.found
	}
	switch {
	case hasPrefixAny(h.last, snowflakeHistoryPrefixes):
		return "the account's query history"
	case equalAny(h.last, snowflakeSessionHistory):
		return "the session's earlier queries and their results"
	}
	return ""
}

func equalAny(s string, list []string) bool {
	for _, x := range list {
		if strings.EqualFold(s, x) {
			return true
		}
	}
	return false
}

func hasPrefixAny(s string, prefixes []string) bool {
	for _, x := range prefixes {
		if len(s) >= len(x) && strings.EqualFold(s[:len(x)], x) {
			return true
		}
	}
	return false
}

// chained returns why a Snowflake statement chains another with the flow
// operator ->> ("SELECT 1 ->> SHOW USERS" runs both), or "".
func (c *classifier) chained(toks []tok) string {
	if c.d != Snowflake {
		return ""
	}
	for i := 0; i+2 < len(toks); i++ {
		if c.isOther(toks, i, "-") && c.isOther(toks, i+1, ">") && c.isOther(toks, i+2, ">") &&
			toks[i+1].start == toks[i].end && toks[i+2].start == toks[i+1].end {
			return "the statement chains another with Snowflake's flow operator ->>; only one statement may run"
		}
	}
	return ""
}
