package agenttest

import (
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
)

// Shape is one way a real model writes an answer (pkg/reply reads them
// all; llmsim's personas write them).
type Shape struct {
	// Name says the shape and, in parentheses, who writes it.
	Name  string
	Reply *llm.Response
	// Reask is, for an unreadable shape, the sentence pkg/reply asks the
	// model again with; "" for a readable one.
	Reask string
}

// Fence is body in a fenced block whose info word is lang ("" for a bare
// fence).
func Fence(lang, body string) string { return "```" + lang + "\n" + body + "\n```" }

// Think is text after a reasoning section, as a reasoning model writes
// it when the endpoint has no reasoning parser.
func Think(reasoning, text string) string { return "<think>\n" + reasoning + "\n</think>\n\n" + text }

// Shapes are the readable shapes of an answer whose SQL is sql: each
// holds sql as its one answer (drafts only inside reasoning), so an agent
// that asks for exactly one query reads sql at its first call whatever
// the shape. sql should not end in ';' (the plain shape adds one, which
// the reader drops).
func Shapes(sql string) []Shape {
	const draft = "SELECT 1"
	return []Shape{
		{Name: "canonical (llmsim)", Reply: Text("Here is the query.\n" + Fence("sql", sql))},
		{Name: "```SQL and prose after (gpt-4o)", Reply: Text(Fence("SQL", sql) + "\n\nThis query answers the question.")},
		{Name: "inline fence in prose (gpt-4o)", Reply: Text("The answer is ```sql " + sql + "``` which answers the question.")},
		{Name: "markdown heading (claude)", Reply: Text("## Query\n\n" + Fence("sql", sql) + "\n\n### Why\nIt answers the question.")},
		{Name: "dialect fence (qwen-coder)", Reply: Text(Fence("sqlite", sql))},
		{Name: "bare fence (qwen-coder)", Reply: Text("The query:\n" + Fence("", sql))},
		{Name: "tilde fence", Reply: Text("~~~sql\n" + sql + "\n~~~")},
		{Name: "no fence (o3)", Reply: Text("The query is:\n\n" + sql + ";\n\nIt answers the question.")},
		{Name: "<think> with a draft (deepseek-r1)", Reply: Text(Think("Maybe "+Fence("sql", draft)+" no, that is not it.", Fence("sql", sql)))},
		{Name: "<think> opened in the prompt (deepseek-r1 template)", Reply: Text("Let me look at the tables. " + Fence("sql", draft) + "\n</think>\n" + Fence("sql", sql))},
		{Name: "reasoning_content (deepseek-reasoner)", Reply: Reasoned("The user wants "+draft+"? No.", Fence("sql", sql))},
	}
}

// Unreadable are the shapes of a reply that holds no answer to run, each
// with the re-ask pkg/reply has for it: cut by the token limit inside
// the query (after a draft too) or while thinking, prose only, empty. sql
// is the query a cut reply was writing.
func Unreadable(sql string) []Shape {
	half := sql[:len(sql)/2]
	return []Shape{
		{Name: "cut inside the query (truncating)", Reply: Cut("Here it is:\n```sql\n" + half), Reask: reply.ReaskCut},
		{Name: "cut after a draft (truncating)", Reply: Cut(Fence("sql", "SELECT 1") + "\nBetter:\n```sql\n" + half), Reask: reply.ReaskCut},
		{Name: "cut while thinking (deepseek-r1)", Reply: Cut("<think>\nThe user wants"), Reask: reply.ReaskCut},
		{Name: "prose only", Reply: Text("I need more information about the schema to answer."), Reask: reply.ReaskNoSQL},
		{Name: "empty", Reply: Text(""), Reask: reply.ReaskEmpty},
	}
}
