// Command gen writes bird-mini, a small dataset in BIRD's layout cut from
// the demo shop database: dev.json (question_id, db_id, question, evidence,
// SQL, difficulty), dev_databases/shop/shop.sqlite (five of the demo's
// tables, fewer rows) and dev_databases/shop/database_description/*.csv.
//
// The description files deliberately come in the encodings and shapes BIRD's
// own do: UTF-8 with a byte order mark and CRLF line ends, latin-1,
// Windows-1252, blank lines, padded fields, stray quotes, short rows and a
// header without the last columns.
//
//	go generate ./examples/bird-mini/...
package main

//go:generate go run . -out .. -demo ../../demo

import (
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite"
)

const dbName = "shop"

// tables are copied with their demo DDL; where selects the rows kept.
var tables = []struct{ name, where string }{
	{"customers", "customer_id <= 60"},
	{"categories", "1"},
	{"products", "1"},
	{"orders", "customer_id <= 60 AND order_id <= 600"},
	{"order_items", "order_id IN (SELECT order_id FROM main.orders)"},
}

type question struct {
	QuestionID int    `json:"question_id"`
	DBID       string `json:"db_id"`
	Question   string `json:"question"`
	Evidence   string `json:"evidence"`
	SQL        string `json:"SQL"`
	Difficulty string `json:"difficulty"`
}

var questions = []question{
	{0, dbName, "How many customers are in the gold loyalty tier?",
		"gold loyalty tier refers to loyalty_tier = 'gold'",
		"SELECT COUNT(customer_id) FROM customers WHERE loyalty_tier = 'gold'", "simple"},
	{1, dbName, "List the names of the subcategories of Electronics.",
		"subcategories of Electronics refers to categories whose parent_id is the category_id of the category named 'Electronics'",
		"SELECT T1.name FROM categories AS T1 INNER JOIN categories AS T2 ON T1.parent_id = T2.category_id WHERE T2.name = 'Electronics'", "simple"},
	{2, dbName, "Which city does the customer with the e-mail address zoe.fischer1@mail.example live in?",
		"e-mail address refers to email",
		"SELECT city FROM customers WHERE email = 'zoe.fischer1@mail.example'", "simple"},
	{3, dbName, "List the ids and birth dates of the customers who live in Lille.",
		"Lille refers to city = 'Lille'",
		"SELECT customer_id, birth_date FROM customers WHERE city = 'Lille'", "simple"},
	{4, dbName, "What is the average price of the discontinued products?",
		"discontinued refers to discontinued = 1; average price = AVG(price)",
		"SELECT AVG(price) FROM products WHERE discontinued = 1", "moderate"},
	{5, dbName, "How many orders placed through the web channel were delivered?",
		"web channel refers to channel = 'web'; delivered refers to status = 'delivered'",
		"SELECT COUNT(order_id) FROM orders WHERE channel = 'web' AND status = 'delivered'", "moderate"},
	{6, dbName, "What percentage of the customers opted in to marketing e-mails?",
		"opted in refers to marketing_opt_in = 1; percentage = DIVIDE(COUNT(marketing_opt_in = 1), COUNT(customer_id)) * 100",
		"SELECT CAST(SUM(CASE WHEN marketing_opt_in = 1 THEN 1 ELSE 0 END) AS REAL) * 100 / COUNT(customer_id) FROM customers", "moderate"},
	{7, dbName, "Which customer spent the most on delivered orders? Give the full name.",
		"full name refers to first_name, last_name; spent refers to SUM(total); delivered refers to status = 'delivered'",
		"SELECT T1.first_name, T1.last_name FROM customers AS T1 INNER JOIN orders AS T2 ON T1.customer_id = T2.customer_id WHERE T2.status = 'delivered' GROUP BY T1.customer_id ORDER BY SUM(T2.total) DESC LIMIT 1", "challenging"},
	{8, dbName, "Among the products of the Shoes category, which one was ordered in the largest total quantity?",
		"Shoes category refers to categories.name = 'Shoes'; largest total quantity refers to MAX(SUM(order_items.quantity))",
		"SELECT T1.name FROM products AS T1 INNER JOIN categories AS T2 ON T1.category_id = T2.category_id INNER JOIN order_items AS T3 ON T1.product_id = T3.product_id WHERE T2.name = 'Shoes' GROUP BY T1.product_id ORDER BY SUM(T3.quantity) DESC LIMIT 1", "challenging"},
}

// latin1 encodes s, which must hold only code points below 256, as
// ISO-8859-1.
func latin1(s string) []byte {
	var b []byte
	for _, r := range s {
		if r > 0xff {
			panic(fmt.Sprintf("%q is not latin-1", r))
		}
		b = append(b, byte(r))
	}
	return b
}

// cp1252 encodes s as Windows-1252 (latin-1 plus the few symbols used here).
func cp1252(s string) []byte {
	high := map[rune]byte{'€': 0x80, '“': 0x93, '”': 0x94, '–': 0x96, '’': 0x92}
	var b []byte
	for _, r := range s {
		if c, ok := high[r]; ok {
			b = append(b, c)
			continue
		}
		b = append(b, latin1(string(r))...)
	}
	return b
}

const header = "original_column_name,column_name,column_description,data_format,value_description"

// descriptions are the files of database_description/, as bytes.
func descriptions() map[string][]byte {
	crlf := func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }
	return map[string][]byte{
		// UTF-8 with a byte order mark and CRLF line ends.
		"customers.csv": append([]byte("\xef\xbb\xbf"), crlf(header+`
customer_id,customer id,the unique id of the customer,integer,
first_name,first name,the customer's first name,text,
last_name,last name,the customer's last name,text,"full name refers to first_name, last_name"
email,e-mail,the customer's e-mail address,text,
phone,,,text,
city,,"the city the customer lives in (Chicago, Zürich, ...)",text,
country,,,text,ISO 3166 two-letter country code
signup_date,signup date,the day the customer opened an account,date,YYYY-MM-DD
birth_date,birth date,the customer's birth date,date,NULL when the customer did not give it
gender,,,text,F: female; M: male
loyalty_tier,loyalty tier,the customer's tier in the loyalty programme,text,"bronze < silver < gold < platinum"
marketing_opt_in,marketing opt in,whether the customer accepts marketing e-mails,integer,1: opted in; 0: not opted in
referred_by,referred by,the customer_id of the customer who referred this one,integer,NULL when nobody referred the customer
status,,,text,active / inactive
`)...),
		// Latin-1 (ISO-8859-1).
		"categories.csv": latin1(header + `
category_id,category id,identifiant de la catégorie,integer,
name,,nom de la catégorie,text,
parent_id,parent id,the category_id of the parent category,integer,NULL for the top-level categories « racine »
description,,,text,
created_at,created at,,datetime,
status,,,text,visible / hidden
`),
		// Windows-1252, with blank lines and padded fields.
		"orders.csv": cp1252(header + `

order_id,  order id , the unique id of the order ,integer,
customer_id,customer id,the customer who placed the order,integer,refers to customers.customer_id

order_date,order date,,date,
status,,the order’s status,text,"“pending”, “shipped”, “delivered”, “returned” or “cancelled”"
channel,,where the order was placed,text,web / mobile / store / marketplace
shipping_address_id,,,integer,
subtotal,,,real,
discount,,,real,
shipping_fee,shipping fee,,real,
tax,,,real,
total,,the amount paid for the order,real,subtotal – discount + shipping_fee + tax
currency,,,text,USD or EUR (€)
coupon_code,coupon code,,text,
created_at,created at,,datetime,

`),
		// UTF-8 without a BOM: a padded header, a stray quote, short rows.
		"products.csv": []byte(` original_column_name , column_name , column_description , data_format , value_description
product_id,product id,the unique id of the product,integer,
sku,,stock keeping unit,text,
name,,the product's name,text,
category_id,category id,the product's category,integer,refers to categories.category_id
supplier_id,supplier id
price,,the list price,real,in the order's currency
cost,,,real,
weight_kg,weight,,real,kilograms
color,,,text,
size,,clothing or screen size,text,S / M / L or 10" and 13" for screens
launch_date,launch date,,date,
discontinued,,whether the product is no longer sold,integer,1: discontinued; 0: on sale
rating,,average review rating,real,1.0 to 5.0
attributes,,,text,JSON object
`),
		// Only three columns in the header, and a padding row.
		"order_items.csv": []byte(`original_column_name,column_name,column_description
order_item_id,order item id,the unique id of the order line
order_id,order id,the order the line belongs to
product_id,product id,the product ordered
quantity,,how many units were ordered
unit_price,unit price,the price of one unit
discount,,
status,,
name,,the product's name when it was ordered
created_at,created at,
,,
`),
	}
}

func main() {
	out := flag.String("out", "..", "dataset folder to write (examples/bird-mini)")
	demo := flag.String("demo", "../../demo", "the demo dataset, whose shop database is cut down")
	flag.Parse()
	if err := write(*out, *demo); err != nil {
		log.Fatal(err)
	}
}

func write(out, demo string) error {
	dbDir := filepath.Join(out, "dev_databases", dbName)
	if err := os.RemoveAll(filepath.Join(out, "dev_databases")); err != nil {
		return err
	}
	descDir := filepath.Join(dbDir, "database_description")
	if err := os.MkdirAll(descDir, 0o755); err != nil {
		return err
	}
	src, err := filepath.Abs(filepath.Join(demo, "resource", "databases", "spider2-localdb", dbName+".sqlite"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(src); err != nil {
		return err
	}
	if err := copyTables(filepath.Join(dbDir, dbName+".sqlite"), src); err != nil {
		return err
	}
	for name, b := range descriptions() {
		if err := os.WriteFile(filepath.Join(descDir, name), b, 0o644); err != nil {
			return err
		}
	}
	js, err := json.MarshalIndent(questions, "", "    ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "dev.json"), append(js, '\n'), 0o644)
}

func copyTables(dst, src string) error {
	db, err := sql.Open("sqlite", dst)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // ATTACH is per connection
	if _, err := db.Exec("PRAGMA page_size = 1024"); err != nil {
		return err
	}
	if _, err := db.Exec("ATTACH DATABASE ? AS src", "file:"+src+"?mode=ro"); err != nil {
		return err
	}
	for _, t := range tables {
		var ddl string
		if err := db.QueryRow("SELECT sql FROM src.sqlite_master WHERE type = 'table' AND name = ?", t.name).Scan(&ddl); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		if _, err := db.Exec(ddl); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		if _, err := db.Exec(fmt.Sprintf("INSERT INTO main.%s SELECT * FROM src.%s WHERE %s ORDER BY rowid", t.name, t.name, t.where)); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	if _, err := db.Exec("DETACH DATABASE src"); err != nil {
		return err
	}
	_, err = db.Exec("VACUUM")
	return err
}
