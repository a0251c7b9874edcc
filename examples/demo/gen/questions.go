package main

// question is one demo task. gold holds the gold SQL of each gold result
// variant (_a, _b, ...); the first is also written to gold/sql/. single
// writes one base file <id>.csv instead of variants.
type question struct {
	id       string
	text     string
	doc      string
	gold     []string
	cond     any // condition_cols, nil for all columns
	ordered  bool
	single   bool
	temporal bool
}

// eventDays lists the daily event tables.
var eventDays = func() []string {
	var out []string
	for d := 1; d <= 14; d++ {
		out = append(out, "events_202403"+string(rune('0'+d/10))+string(rune('0'+d%10)))
	}
	return out
}()

// unionEvents is a UNION ALL over every daily events table with the given
// column list.
func unionEvents(cols string) string {
	s := ""
	for i, t := range eventDays {
		if i > 0 {
			s += "\n  UNION ALL "
		}
		s += "SELECT " + cols + " FROM " + t
	}
	return s
}

var questions = []question{
	// Easy: one table.
	{id: "local001", text: "How many customers does the shop have?",
		gold: []string{"SELECT COUNT(*) AS customer_count FROM customers"}, single: true},
	{id: "local002", text: "How many products are discontinued?",
		gold: []string{"SELECT COUNT(*) AS discontinued_products FROM products WHERE discontinued = 1"}},
	{id: "local003", text: "List the names of the top-level product categories (those without a parent), in alphabetical order.",
		gold: []string{"SELECT name FROM categories WHERE parent_id IS NULL ORDER BY name"}, ordered: true},
	{id: "local004", text: "What is the total amount charged for delivered orders, across all currencies? Round to 2 decimals.",
		gold: []string{"SELECT ROUND(SUM(total), 2) AS delivered_total FROM orders WHERE status = 'delivered'"}},
	{id: "local005", text: "How many orders came through each sales channel?",
		gold: []string{"SELECT channel, COUNT(*) AS orders FROM orders GROUP BY channel"}},
	{id: "local006", text: "Which country has the most customers? Give the country code and the number of customers.",
		gold: []string{"SELECT country, COUNT(*) AS customers FROM customers GROUP BY country ORDER BY customers DESC LIMIT 1"}},
	{id: "local007", text: "What is the average list price of products in each category? Give the category name and the average rounded to 2 decimals.",
		gold: []string{"SELECT c.name AS category, ROUND(AVG(p.price), 2) AS avg_price FROM products p JOIN categories c ON c.category_id = p.category_id GROUP BY c.name"}},
	{id: "local008", text: "Which five products sold the most units, not counting cancelled orders? Give the product name and the units sold.",
		gold: []string{`SELECT p.name, SUM(oi.quantity) AS units
FROM order_items oi JOIN orders o ON o.order_id = oi.order_id JOIN products p ON p.product_id = oi.product_id
WHERE o.status <> 'cancelled'
GROUP BY p.product_id, p.name ORDER BY units DESC, p.name LIMIT 5`}, cond: []int{1}},
	{id: "local009", text: "For each month of 2024, how many orders were placed and what was their total amount? Round the amount to 2 decimals.",
		gold: []string{`SELECT strftime('%Y-%m', order_date) AS month, COUNT(*) AS orders, ROUND(SUM(total), 2) AS amount
FROM orders WHERE order_date >= '2024-01-01' AND order_date < '2025-01-01' GROUP BY month ORDER BY month`}},
	{id: "local010", text: "How many customers signed up in 2023 but have never placed an order?",
		gold: []string{`SELECT COUNT(*) AS customers FROM customers c
WHERE c.signup_date BETWEEN '2023-01-01' AND '2023-12-31'
  AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id)`}},
	{id: "local011", text: "How many units are in stock at each warehouse? Give the warehouse name and the units.",
		gold: []string{"SELECT w.name, SUM(i.quantity) AS units FROM inventory i JOIN warehouses w ON w.warehouse_id = i.warehouse_id GROUP BY w.name"}},
	{id: "local012", text: "What percentage of payments were made by card? Round to 2 decimals.",
		gold: []string{
			"SELECT ROUND(100.0 * SUM(method = 'card') / COUNT(*), 2) AS card_pct FROM payments",
			"SELECT ROUND(1.0 * SUM(method = 'card') / COUNT(*), 4) AS card_share FROM payments",
		}},
	{id: "local013", text: "For each carrier, what is the average number of days between shipping and delivery for delivered shipments? Round to 2 decimals.",
		gold: []string{`SELECT carrier, ROUND(AVG(julianday(delivered_date) - julianday(shipped_date)), 2) AS avg_days
FROM shipments WHERE delivered_date IS NOT NULL GROUP BY carrier`}},
	{id: "local014", text: "Which supplier's products have the highest average product rating? Give the supplier name and the average rating rounded to 2 decimals.",
		gold: []string{`SELECT s.name, ROUND(AVG(p.rating), 2) AS avg_rating FROM products p JOIN suppliers s ON s.supplier_id = p.supplier_id
GROUP BY s.supplier_id, s.name ORDER BY AVG(p.rating) DESC LIMIT 1`}},
	{id: "local015", text: "Which employees earn more than the average salary of their department? Give first name, last name, department and salary.",
		gold: []string{`SELECT e.first_name, e.last_name, e.department, e.salary FROM employees e
WHERE e.salary > (SELECT AVG(salary) FROM employees x WHERE x.department = e.department)`}},
	{id: "local016", text: "What is the average order amount for customers of each loyalty tier? Round to 2 decimals.",
		gold: []string{`SELECT c.loyalty_tier, ROUND(AVG(o.total), 2) AS avg_total FROM orders o JOIN customers c ON c.customer_id = o.customer_id
GROUP BY c.loyalty_tier`}},
	{id: "local017", text: "Which products have never been ordered? List their SKUs.",
		gold: []string{"SELECT sku FROM products p WHERE NOT EXISTS (SELECT 1 FROM order_items oi WHERE oi.product_id = p.product_id)"}},

	// Medium: windows, dates, percentages, ties.
	{id: "local018", text: "Rank product categories by revenue from order lines (quantity times unit price after the line discount) and return the top 3 with their revenue rounded to 2 decimals, keeping ties.",
		gold: []string{`WITH rev AS (
  SELECT c.name AS category, SUM(oi.quantity * oi.unit_price * (1 - oi.discount)) AS revenue
  FROM order_items oi JOIN products p ON p.product_id = oi.product_id JOIN categories c ON c.category_id = p.category_id
  GROUP BY c.name)
SELECT category, ROUND(revenue, 2) AS revenue FROM (SELECT *, RANK() OVER (ORDER BY revenue DESC) AS rnk FROM rev) WHERE rnk <= 3`}},
	{id: "local019", text: "For each day of March 2024, give the order amount of that day and the running total since March 1, both rounded to 2 decimals.",
		gold: []string{`WITH daily AS (SELECT order_date, SUM(total) AS amount FROM orders WHERE order_date BETWEEN '2024-03-01' AND '2024-03-31' GROUP BY order_date)
SELECT order_date, ROUND(amount, 2) AS amount, ROUND(SUM(amount) OVER (ORDER BY order_date), 2) AS running_total FROM daily ORDER BY order_date`}},
	{id: "local020", text: "Among customers with at least two orders, what is the average number of days between their first and second order? Round to 2 decimals.",
		gold: []string{`WITH ranked AS (
  SELECT customer_id, order_date, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY order_date, order_id) AS n FROM orders)
SELECT ROUND(AVG(julianday(b.order_date) - julianday(a.order_date)), 2) AS avg_days
FROM ranked a JOIN ranked b ON a.customer_id = b.customer_id AND a.n = 1 AND b.n = 2`}},
	{id: "local021", text: "For each month of 2024, give the number of orders and the percentage change from the previous month (rounded to 2 decimals; empty for January).",
		gold: []string{`WITH m AS (SELECT strftime('%Y-%m', order_date) AS month, COUNT(*) AS orders FROM orders WHERE order_date LIKE '2024-%' GROUP BY month)
SELECT month, orders, ROUND(100.0 * (orders - LAG(orders) OVER (ORDER BY month)) / LAG(orders) OVER (ORDER BY month), 2) AS growth_pct FROM m ORDER BY month`}},
	{id: "local022", text: "What is the gross margin percentage of each top-level category? Use the definition in the document. Round to 2 decimals.",
		doc: "gross_margin.md",
		gold: []string{`WITH lines AS (
  SELECT COALESCE(parent.name, c.name) AS top_category,
         oi.quantity * oi.unit_price * (1 - oi.discount) AS revenue,
         oi.quantity * p.cost AS cost
  FROM order_items oi JOIN orders o ON o.order_id = oi.order_id
  JOIN products p ON p.product_id = oi.product_id
  JOIN categories c ON c.category_id = p.category_id
  LEFT JOIN categories parent ON parent.category_id = c.parent_id
  WHERE o.status NOT IN ('cancelled', 'returned'))
SELECT top_category, ROUND(100.0 * (SUM(revenue) - SUM(cost)) / SUM(revenue), 2) AS gross_margin_pct FROM lines GROUP BY top_category`}},
	{id: "local023", text: "Which three customers spent the most on delivered orders? Give their full name (first and last name separated by a space) and the amount rounded to 2 decimals; keep ties.",
		gold: []string{`WITH spend AS (SELECT customer_id, SUM(total) AS amount FROM orders WHERE status = 'delivered' GROUP BY customer_id),
r AS (SELECT customer_id, amount, RANK() OVER (ORDER BY amount DESC) AS rnk FROM spend)
SELECT c.first_name || ' ' || c.last_name AS customer, ROUND(r.amount, 2) AS amount FROM r JOIN customers c ON c.customer_id = r.customer_id WHERE r.rnk <= 3`}},
	{id: "local024", text: "How many distinct browsing sessions were there on March 5, 2024?",
		gold: []string{"SELECT COUNT(DISTINCT session_id) AS sessions FROM events_20240305"}},
	{id: "local025", text: "How many purchase events happened on each day from March 1 to March 14, 2024?",
		gold: []string{"SELECT substr(event_time, 1, 10) AS day, COUNT(*) AS purchases FROM (\n  " + unionEvents("event_time, event_name") + "\n) WHERE event_name = 'purchase' GROUP BY day ORDER BY day"}},
	{id: "local026", text: "Using the funnel definition in the document, how many sessions reached each funnel stage over March 1-14, 2024?",
		doc:  "event_funnel.md",
		gold: []string{"WITH e AS (\n  " + unionEvents("session_id, event_name") + "\n)\nSELECT event_name AS stage, COUNT(DISTINCT session_id) AS sessions FROM e WHERE event_name IN ('view_item', 'add_to_cart', 'begin_checkout', 'purchase') GROUP BY event_name"}},
	{id: "local027", text: "What was the most common device among view_item events on March 10, 2024, and how many such events came from it?",
		gold: []string{"SELECT device, COUNT(*) AS events FROM events_20240310 WHERE event_name = 'view_item' GROUP BY device ORDER BY events DESC LIMIT 1"}},
	{id: "local028", text: "How many products are made of each material (from the product attributes)?",
		gold: []string{"SELECT json_extract(attributes, '$.material') AS material, COUNT(*) AS products FROM products GROUP BY material"}},
	{id: "local029", text: "What is the average product height in cm (the h dimension in the product attributes) for each category? Give the category name and the average rounded to 2 decimals.",
		gold: []string{`SELECT c.name, ROUND(AVG(json_extract(p.attributes, '$.dimensions.h')), 2) AS avg_height
FROM products p JOIN categories c ON c.category_id = p.category_id GROUP BY c.name`}},
	{id: "local030", text: "Across add_to_cart events from March 1 to March 7, 2024, which product was added to carts in the largest total quantity? Give the product id and the quantity.",
		gold: []string{"WITH e AS (\n  " + func() string {
			s := ""
			for i, t := range eventDays[:7] {
				if i > 0 {
					s += "\n  UNION ALL "
				}
				s += "SELECT event_name, params FROM " + t
			}
			return s
		}() + "\n)\nSELECT json_extract(j.value, '$.product_id') AS product_id, SUM(json_extract(j.value, '$.qty')) AS quantity\nFROM e, json_each(e.params, '$.items') j WHERE e.event_name = 'add_to_cart'\nGROUP BY product_id ORDER BY quantity DESC, product_id LIMIT 1"}},
	{id: "local031", text: "On March 8, 2024, how many purchase events did each marketing campaign bring? Leave out events without a campaign.",
		gold: []string{"SELECT json_extract(params, '$.campaign') AS campaign, COUNT(*) AS purchases FROM events_20240308 WHERE event_name = 'purchase' AND json_extract(params, '$.campaign') IS NOT NULL GROUP BY campaign"}},
	{id: "local032", text: "Using the customer segments in the document, how many customers fall in each segment?",
		doc: "customer_segments.md",
		gold: []string{`WITH spend AS (
  SELECT c.customer_id, COALESCE(SUM(CASE WHEN o.status = 'delivered' THEN o.total END), 0) AS amount
  FROM customers c LEFT JOIN orders o ON o.customer_id = c.customer_id GROUP BY c.customer_id)
SELECT CASE WHEN amount >= 3000 THEN 'VIP' WHEN amount >= 1000 THEN 'regular' WHEN amount > 0 THEN 'occasional' ELSE 'prospect' END AS segment,
       COUNT(*) AS customers
FROM spend GROUP BY segment`}},
	{id: "local033", text: "What is the return rate of each top-level category, as the percentage of ordered lines that were returned? Round to 2 decimals.",
		gold: []string{`SELECT COALESCE(parent.name, c.name) AS top_category, ROUND(100.0 * SUM(oi.status = 'returned') / COUNT(*), 2) AS return_rate_pct
FROM order_items oi JOIN products p ON p.product_id = oi.product_id JOIN categories c ON c.category_id = p.category_id
LEFT JOIN categories parent ON parent.category_id = c.parent_id GROUP BY top_category`}},
	{id: "local034", text: "How many customers with at least two orders had every one of their orders delivered?",
		gold: []string{"SELECT COUNT(*) AS customers FROM (SELECT customer_id FROM orders GROUP BY customer_id HAVING COUNT(*) >= 2 AND SUM(status <> 'delivered') = 0)"}},
	{id: "local035", text: "For each warehouse, how many products are below their reorder level? Give the warehouse name and the count.",
		gold: []string{"SELECT w.name, COUNT(*) AS below_reorder FROM inventory i JOIN warehouses w ON w.warehouse_id = i.warehouse_id WHERE i.quantity < i.reorder_level GROUP BY w.name"}},
	{id: "local036", text: "Which manager has the most direct reports? Give the manager's first and last name and the number of reports.",
		gold: []string{`SELECT m.first_name, m.last_name, COUNT(*) AS reports FROM employees e JOIN employees m ON m.employee_id = e.manager_id
GROUP BY m.employee_id ORDER BY reports DESC LIMIT 1`}},

	// Hard: several steps.
	{id: "local037", text: "For each leaf category (one with a parent), which product has the second highest price? Give the category name, product name and price.",
		gold: []string{`WITH r AS (SELECT c.name AS category, p.name AS product, p.price, DENSE_RANK() OVER (PARTITION BY c.category_id ORDER BY p.price DESC) AS rnk
  FROM products p JOIN categories c ON c.category_id = p.category_id WHERE c.parent_id IS NOT NULL)
SELECT category, product, price FROM r WHERE rnk = 2`}},
	{id: "local038", text: "What is the median amount of orders placed in 2024? Round to 2 decimals.",
		gold: []string{`WITH o AS (SELECT total, ROW_NUMBER() OVER (ORDER BY total) AS rn, COUNT(*) OVER () AS n FROM orders WHERE order_date LIKE '2024-%')
SELECT ROUND(AVG(total), 2) AS median_total FROM o WHERE rn IN ((n + 1) / 2, (n + 2) / 2)`}},
	{id: "local039", text: "On which day of the week (0 = Sunday to 6 = Saturday) is the average order amount highest, and what is that average rounded to 2 decimals?",
		gold: []string{"SELECT CAST(strftime('%w', order_date) AS INTEGER) AS weekday, ROUND(AVG(total), 2) AS avg_total FROM orders GROUP BY weekday ORDER BY AVG(total) DESC LIMIT 1"}},
	{id: "local040", text: "For each coupon code that is a real promotion, how many orders used it and what was the total discount given? Round the discount to 2 decimals.",
		gold: []string{"SELECT o.coupon_code, COUNT(*) AS orders, ROUND(SUM(o.discount), 2) AS total_discount FROM orders o JOIN promotions p ON p.code = o.coupon_code GROUP BY o.coupon_code"}},
	{id: "local041", text: "Among products with at least 10 published reviews, which 5 have the highest average review rating? Give product name and average rating rounded to 2 decimals.",
		gold: []string{`SELECT p.name, ROUND(AVG(r.rating), 2) AS avg_rating FROM reviews r JOIN products p ON p.product_id = r.product_id
WHERE r.status = 'published' GROUP BY p.product_id HAVING COUNT(*) >= 10 ORDER BY AVG(r.rating) DESC, p.name LIMIT 5`}},
	{id: "local042", text: "How many customers count as active under the definition in the document?",
		doc: "customer_segments.md", temporal: true,
		gold: []string{"SELECT COUNT(DISTINCT customer_id) AS active_customers FROM orders WHERE status <> 'cancelled' AND order_date > date('2024-12-31', '-90 days')"}},
	{id: "local043", text: "What share of the total order amount is in each currency? Give the currency and the percentage rounded to 2 decimals.",
		gold: []string{"SELECT currency, ROUND(100.0 * SUM(total) / (SELECT SUM(total) FROM orders), 2) AS share_pct FROM orders GROUP BY currency"}},
	{id: "local044", text: "For each country, which city has the most customers? Keep all cities that tie for first place. Give country, city and number of customers.",
		gold: []string{`WITH c AS (SELECT country, city, COUNT(*) AS customers FROM customers GROUP BY country, city)
SELECT country, city, customers FROM (SELECT *, RANK() OVER (PARTITION BY country ORDER BY customers DESC) AS rnk FROM c) WHERE rnk = 1`}},
}

// documents are the external-knowledge files, referenced by name.
var documents = map[string]string{
	"gross_margin.md": `# Gross margin

Gross margin measures what is left of sales after paying for the goods sold.

- **Revenue** of an order line = quantity × unit_price × (1 − discount), where
  ` + "`discount`" + ` is the line's fractional discount.
- **Cost** of an order line = quantity × the product's unit ` + "`cost`" + `.
- Only lines of orders that were not cancelled and not returned count.

Gross margin % = (Σ revenue − Σ cost) / Σ revenue × 100.

A **top-level category** is a category without a parent; a product in a
sub-category belongs to its parent's top-level category.
`,
	"customer_segments.md": `# Customer segments

Segments are based on the total amount of a customer's **delivered** orders
(the ` + "`total`" + ` column, all currencies added as they are):

| segment    | delivered amount        |
|------------|-------------------------|
| VIP        | 3000 or more            |
| regular    | 1000 up to 3000         |
| occasional | more than 0, below 1000 |
| prospect   | nothing delivered yet   |

A customer is **active** when they placed at least one order that was not
cancelled in the 90 days before the reporting date of 2024-12-31 (order
dates after 2024-10-02).
`,
	"event_funnel.md": `# Purchase funnel

The site logs one row per event in the daily tables ` + "`events_YYYYMMDD`" + `.
A session moves through four funnel stages, each an ` + "`event_name`" + `:

1. ` + "`view_item`" + ` — the visitor opened a product page;
2. ` + "`add_to_cart`" + ` — a product went into the cart;
3. ` + "`begin_checkout`" + ` — the visitor started paying;
4. ` + "`purchase`" + ` — the order was placed.

A session "reaches" a stage when it logged at least one event of that name.
` + "`page_view`" + ` is not a funnel stage. Conversion rate = sessions reaching
purchase / sessions reaching view_item.
`,
}
