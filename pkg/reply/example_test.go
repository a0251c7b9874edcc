package reply_test

import (
	"fmt"

	"github.com/quorumsql/quorum/pkg/reply"
)

// A model's answer in whatever wrapper it chose is read to its statement;
// prose that only begins with a SQL word is a refusal, never run.
func ExampleSQL() {
	for _, text := range []string{
		"Here is the query:\n```sql\nSELECT name FROM customers;\n```\nLet me know!",
		"<answer>SELECT name FROM customers</answer>",
		`{"sql": "SELECT name FROM customers"}`,
		"Select the table first: with the schema given I cannot tell which one holds the customers.",
	} {
		sql, err := reply.SQL(text, "stop")
		fmt.Printf("%q refusal=%v\n", sql, reply.IsRefusal(err))
	}
	// Output:
	// "SELECT name FROM customers" refusal=false
	// "SELECT name FROM customers" refusal=false
	// "SELECT name FROM customers" refusal=false
	// "" refusal=true
}

// Key is how queries are compared: the same statement written otherwise
// has the same key.
func ExampleKey() {
	fmt.Println(reply.Key("select name\r\nFROM customers ;") == reply.Key("SELECT name FROM customers"))
	// Output: true
}
