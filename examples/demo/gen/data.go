package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// shopData builds every table's rows from one seeded generator, so the
// output is the same on every run.
type shopData struct {
	rng    *rand.Rand
	rows   map[string][][]any
	events map[string][][]any // by table name
	// helpers kept while generating
	productPrice map[int]float64
	productName  map[int]string
}

var (
	countries = []struct {
		code   string
		weight int
		cities []string
	}{
		{"US", 40, []string{"New York", "Chicago", "Austin", "Seattle", "Denver"}},
		{"DE", 15, []string{"Berlin", "Munich", "Hamburg"}},
		{"GB", 15, []string{"London", "Manchester", "Leeds"}},
		{"FR", 12, []string{"Paris", "Lyon", "Lille"}},
		{"CA", 10, []string{"Toronto", "Vancouver"}},
		{"ES", 8, []string{"Madrid", "Valencia"}},
	}
	firstNames = []string{"Ann", "Bob", "Carla", "Dev", "Eva", "Finn", "Gia", "Hugo", "Ines", "Jon", "Kai", "Lena", "Mia", "Noah", "Omar", "Pia", "Quin", "Rosa", "Sam", "Tara", "Uma", "Vik", "Wen", "Yara", "Zoe"}
	lastNames  = []string{"Adams", "Berg", "Costa", "Dubois", "Evans", "Fischer", "Garcia", "Hansen", "Ito", "Jones", "Klein", "Lopez", "Meyer", "Novak", "Olsen", "Petit", "Rossi", "Smith", "Torres", "Weber"}
	materials  = []string{"cotton", "steel", "plastic", "wood", "aluminium", "leather", "glass"}
	colors     = []string{"black", "white", "red", "blue", "green", "grey"}
	tiers      = []string{"bronze", "silver", "gold", "platinum"}
	channels   = []string{"web", "mobile", "marketplace", "store"}
	carriers   = []string{"UPS", "DHL", "FedEx", "USPS"}
	sources    = []string{"google", "newsletter", "direct", "instagram", "partner"}
	campaigns  = []string{"spring_sale", "new_arrivals", "loyalty_boost"}
)

func (d *shopData) pick(xs []string) string { return xs[d.rng.IntN(len(xs))] }

func (d *shopData) date(from time.Time, days int) time.Time {
	return from.AddDate(0, 0, d.rng.IntN(days))
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

func ymd(t time.Time) string { return t.Format("2006-01-02") }
func ts(t time.Time) string  { return t.Format("2006-01-02 15:04:05") }

func (d *shopData) clock(t time.Time) time.Time {
	return t.Add(time.Duration(d.rng.IntN(86400)) * time.Second)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func generate(seed uint64) *shopData {
	d := &shopData{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), rows: map[string][][]any{},
		events: map[string][][]any{}, productPrice: map[int]float64{}, productName: map[int]string{}}
	d.categories()
	d.suppliers()
	d.products()
	d.customers()
	d.promotions()
	d.employeesAndWarehouses()
	d.orders()
	d.inventory()
	d.reviews()
	d.eventsTables()
	return d
}

var epoch = time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC)

func (d *shopData) categories() {
	cats := []struct {
		name   string
		parent any
	}{
		{"Electronics", nil}, {"Home", nil}, {"Apparel", nil}, {"Sports", nil}, {"Books", nil},
		{"Phones", 1}, {"Laptops", 1}, {"Audio", 1}, {"Kitchen", 2}, {"Furniture", 2},
		{"Outerwear", 3}, {"Shoes", 3}, {"Cycling", 4}, {"Fiction", 5},
	}
	for i, c := range cats {
		status := "visible"
		if c.name == "Fiction" {
			status = "hidden"
		}
		d.rows["categories"] = append(d.rows["categories"], []any{i + 1, c.name, c.parent,
			"Everything in " + c.name + ".", ts(d.clock(d.date(epoch, 60))), status})
	}
}

func (d *shopData) suppliers() {
	names := []string{"Acme Goods", "Borealis Trading", "Cedar & Co", "Delta Supply", "Evergreen Imports", "Fjord Works",
		"Granite Partners", "Harbor Wholesale", "Iris Manufacturing", "Juniper Ltd", "Kestrel Brands", "Lumen Factory"}
	for i, n := range names {
		c := countries[d.rng.IntN(len(countries))]
		status := "active"
		if i%5 == 4 {
			status = "terminated"
		}
		d.rows["suppliers"] = append(d.rows["suppliers"], []any{i + 1, n, d.pick(firstNames) + " " + d.pick(lastNames),
			fmt.Sprintf("sales@supplier%d.example", i+1), fmt.Sprintf("+1-555-%04d", d.rng.IntN(10000)),
			d.pick(c.cities), c.code, round2(2 + d.rng.Float64()*3), ymd(d.date(epoch, 500)), status})
	}
}

func (d *shopData) products() {
	kinds := map[int][]string{
		6: {"Phone", "Smartphone"}, 7: {"Laptop", "Ultrabook"}, 8: {"Headphones", "Speaker", "Earbuds"},
		9: {"Blender", "Kettle", "Pan"}, 10: {"Chair", "Desk", "Shelf"}, 11: {"Jacket", "Raincoat"},
		12: {"Sneaker", "Boot"}, 13: {"Helmet", "Bike Light"}, 14: {"Novel", "Anthology"},
	}
	base := map[int]float64{6: 600, 7: 1100, 8: 120, 9: 60, 10: 180, 11: 140, 12: 90, 13: 45, 14: 15}
	id := 0
	for cat := 6; cat <= 14; cat++ {
		for j := 0; j < 13; j++ {
			id++
			name := fmt.Sprintf("%s %s %d", d.pick([]string{"Nova", "Terra", "Vivid", "Orbit", "Pulse", "Aero"}), d.pick(kinds[cat]), 100+id)
			price := round2(base[cat] * (0.5 + d.rng.Float64()))
			cost := round2(price * (0.4 + 0.4*d.rng.Float64()))
			var color, size any
			if cat != 14 {
				color = d.pick(colors)
			}
			if cat == 11 || cat == 12 {
				size = d.pick([]string{"S", "M", "L", "XL"})
			}
			disc := 0
			if d.rng.IntN(10) == 0 {
				disc = 1
			}
			attrs := map[string]any{
				"material":   d.pick(materials),
				"dimensions": map[string]any{"w": round2(5 + d.rng.Float64()*60), "h": round2(2 + d.rng.Float64()*90), "d": round2(1 + d.rng.Float64()*40)},
				"tags":       []string{d.pick([]string{"new", "bestseller", "eco", "gift"}), d.pick([]string{"sale", "premium", "classic"})},
			}
			d.productPrice[id] = price
			d.productName[id] = name
			d.rows["products"] = append(d.rows["products"], []any{id, fmt.Sprintf("SKU-%05d", id*37), name, cat,
				1 + d.rng.IntN(12), price, cost, round2(0.2 + d.rng.Float64()*8), color, size,
				ymd(d.date(epoch, 900)), disc, math.Round((2.5+d.rng.Float64()*2.5)*10) / 10, mustJSON(attrs)})
		}
	}
}

func (d *shopData) customers() {
	total := 0
	for _, c := range countries {
		total += c.weight
	}
	addr := 0
	for id := 1; id <= 300; id++ {
		r := d.rng.IntN(total)
		c := countries[0]
		for _, cc := range countries {
			if r < cc.weight {
				c = cc
				break
			}
			r -= cc.weight
		}
		first, last := d.pick(firstNames), d.pick(lastNames)
		city := d.pick(c.cities)
		var gender, birth, referred any
		if d.rng.IntN(6) > 0 {
			gender = d.pick([]string{"F", "M", "X", "F", "M"})
		}
		if d.rng.IntN(4) > 0 {
			birth = ymd(time.Date(1950+d.rng.IntN(55), time.Month(1+d.rng.IntN(12)), 1+d.rng.IntN(28), 0, 0, 0, 0, time.UTC))
		}
		if id > 20 && d.rng.IntN(8) == 0 {
			referred = 1 + d.rng.IntN(id-1)
		}
		status := "active"
		if d.rng.IntN(10) == 0 {
			status = "inactive"
		}
		signup := d.date(epoch, 3*365)
		d.rows["customers"] = append(d.rows["customers"], []any{id, first, last,
			fmt.Sprintf("%s.%s%d@mail.example", lower(first), lower(last), id),
			fmt.Sprintf("+%d-555-%04d", 1+d.rng.IntN(49), d.rng.IntN(10000)), city, c.code, ymd(signup),
			birth, gender, tiers[min(3, d.rng.IntN(7)/2)], d.rng.IntN(2), referred, status})
		for k := 0; k <= d.rng.IntN(2); k++ {
			addr++
			var line2 any
			if d.rng.IntN(3) == 0 {
				line2 = fmt.Sprintf("Apt %d", 1+d.rng.IntN(40))
			}
			d.rows["addresses"] = append(d.rows["addresses"], []any{addr, id, fmt.Sprintf("%d %s Street", 1+d.rng.IntN(200), d.pick(lastNames)),
				line2, city, "Region " + string(rune('A'+d.rng.IntN(6))), fmt.Sprintf("%05d", d.rng.IntN(99999)), c.code,
				boolInt(k == 0), ts(d.clock(signup))})
		}
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

var promoCodes = []struct {
	code string
	pct  float64
}{{"WELCOME10", 10}, {"SPRING15", 15}, {"VIP20", 20}, {"SUMMER5", 5}, {"BLACKFRIDAY25", 25}, {"FREESHIP", 0}}

func (d *shopData) promotions() {
	for i, p := range promoCodes {
		start := d.date(time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC), 300)
		status := "expired"
		if i%2 == 0 {
			status = "active"
		}
		d.rows["promotions"] = append(d.rows["promotions"], []any{i + 1, p.code, fmt.Sprintf("%.0f%% off", p.pct),
			p.pct, ymd(start), ymd(start.AddDate(0, 6, 0)), status, float64(20 * (i + 1))})
	}
}

func (d *shopData) employeesAndWarehouses() {
	whs := []struct{ name, city, country, region string }{
		{"East Hub", "New York", "US", "NA"}, {"West Hub", "Seattle", "US", "NA"}, {"Central DC", "Chicago", "US", "NA"},
		{"Rhein Lager", "Hamburg", "DE", "EU"}, {"Paris Nord", "Paris", "FR", "EU"}, {"Thames Depot", "London", "GB", "UK"},
	}
	depts := []string{"operations", "sales", "support", "finance", "it"}
	// Employee 1 is the CEO; managers 2-6 run departments; the rest report
	// to a manager.
	for id := 1; id <= 40; id++ {
		var manager, wh any
		//lint:ignore SA4006 the draw keeps the generator's sequence, so the demo's data stay as published
		title, dept := "Associate", depts[d.rng.IntN(len(depts))]
		switch {
		case id == 1:
			title, dept = "CEO", "finance"
		case id <= 6:
			title, dept, manager = "Head of "+depts[id-2], depts[id-2], 1
		default:
			manager = 2 + d.rng.IntN(5)
			dept = depts[manager.(int)-2]
		}
		if dept == "operations" && id > 6 {
			wh = 1 + d.rng.IntN(len(whs))
		}
		salary := round2(40000 + d.rng.Float64()*50000)
		if id <= 6 {
			salary = round2(110000 + d.rng.Float64()*60000)
		}
		status := "active"
		if d.rng.IntN(12) == 0 {
			status = "left"
		}
		fn, ln := d.pick(firstNames), d.pick(lastNames)
		d.rows["employees"] = append(d.rows["employees"], []any{id, fn, ln, title, dept,
			ymd(d.date(time.Date(2018, 1, 1, 0, 0, 0, 0, time.UTC), 2000)), salary, manager, wh,
			fmt.Sprintf("%s.%s@shop.example", lower(fn), lower(ln)), status, d.pick(countries[0].cities)})
	}
	for i, w := range whs {
		d.rows["warehouses"] = append(d.rows["warehouses"], []any{i + 1, w.name, w.city, w.country,
			5000 * (2 + d.rng.IntN(8)), ymd(d.date(time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC), 2500)), 2, "operating", w.region})
	}
}

func (d *shopData) orders() {
	start := time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)
	addrOf := map[int][]int{}
	for _, a := range d.rows["addresses"] {
		addrOf[a[1].(int)] = append(addrOf[a[1].(int)], a[0].(int))
	}
	item, pay, ship, ret := 0, 0, 0, 0
	for id := 1; id <= 2000; id++ {
		// A third of customers order often, a tenth never order.
		cust := 1 + d.rng.IntN(270)
		if d.rng.IntN(3) == 0 {
			cust = 1 + d.rng.IntN(60)
		}
		day := d.date(start, 730)
		statusRoll := d.rng.IntN(100)
		status := "delivered"
		switch {
		case statusRoll < 8:
			status = "cancelled"
		case statusRoll < 13:
			status = "returned"
		case statusRoll < 20:
			status = "pending"
		case statusRoll < 30:
			status = "shipped"
		}
		if day.After(time.Date(2024, 12, 20, 0, 0, 0, 0, time.UTC)) && status == "delivered" {
			status = "shipped"
		}
		var subtotal float64
		var lines [][]any
		for k := 0; k <= d.rng.IntN(4); k++ {
			item++
			pid := 1 + d.rng.IntN(110) // the last products are never ordered
			qty := 1 + d.rng.IntN(3)
			price := d.productPrice[pid]
			disc := 0.0
			if d.rng.IntN(5) == 0 {
				disc = 0.1
			}
			lineStatus := "ok"
			if status == "returned" && k == 0 {
				lineStatus = "returned"
			}
			subtotal += float64(qty) * price * (1 - disc)
			lines = append(lines, []any{item, id, pid, qty, price, disc, lineStatus, d.productName[pid], ts(d.clock(day))})
			if lineStatus == "returned" {
				ret++
				reason := d.pick([]string{"damaged", "wrong_size", "not_as_described", "changed_mind"})
				refund := round2(float64(qty) * price * (1 - disc))
				d.rows["returns"] = append(d.rows["returns"], []any{ret, item, reason, "refunded",
					ts(d.clock(day.AddDate(0, 0, 10+d.rng.IntN(10)))), refund, d.rng.IntN(2), 7 + d.rng.IntN(30), nil})
			}
		}
		subtotal = round2(subtotal)
		var coupon any
		discount := 0.0
		if d.rng.IntN(7) == 0 {
			if d.rng.IntN(6) == 0 {
				coupon = "OLDCODE"
			} else {
				p := promoCodes[d.rng.IntN(len(promoCodes))]
				coupon = p.code
				discount = round2(subtotal * p.pct / 100)
			}
		}
		shipping := 0.0
		if subtotal < 100 {
			shipping = 7.5
		}
		tax := round2((subtotal - discount) * 0.08)
		total := round2(subtotal - discount + shipping + tax)
		currency := "USD"
		switch r := d.rng.IntN(10); {
		case r < 2:
			currency = "EUR"
		case r < 3:
			currency = "GBP"
		}
		addr := addrOf[cust][0]
		d.rows["orders"] = append(d.rows["orders"], []any{id, cust, ymd(day), status, d.pick(channels), addr,
			subtotal, discount, shipping, tax, total, currency, coupon, ts(d.clock(day))})
		d.rows["order_items"] = append(d.rows["order_items"], lines...)
		if status != "cancelled" || d.rng.IntN(2) == 0 {
			pay++
			method := d.pick([]string{"card", "card", "card", "paypal", "bank_transfer", "gift_card"})
			var brand any
			if method == "card" {
				brand = d.pick([]string{"visa", "mastercard", "amex"})
			}
			pstatus := "captured"
			if status == "cancelled" || status == "returned" {
				pstatus = "refunded"
			}
			d.rows["payments"] = append(d.rows["payments"], []any{pay, id, method, total, pstatus,
				ts(d.clock(day)), d.pick([]string{"Stripe", "Adyen", "PayPal"}), brand, currency, round2(total * 0.029)})
		}
		if status == "shipped" || status == "delivered" || status == "returned" {
			ship++
			carrier := d.pick(carriers)
			shipped := day.AddDate(0, 0, d.rng.IntN(3))
			var delivered any
			sstatus := "in_transit"
			if status != "shipped" {
				slow := map[string]int{"UPS": 3, "DHL": 4, "FedEx": 2, "USPS": 6}[carrier]
				delivered = ymd(shipped.AddDate(0, 0, slow+d.rng.IntN(4)))
				sstatus = "delivered"
				if status == "returned" {
					sstatus = "returned"
				}
			}
			d.rows["shipments"] = append(d.rows["shipments"], []any{ship, id, carrier, fmt.Sprintf("TRK%09d", d.rng.IntN(1e9)),
				ymd(shipped), delivered, sstatus, 1 + d.rng.IntN(6), round2(5 + d.rng.Float64()*20), round2(0.5 + d.rng.Float64()*10),
				d.pick([]string{"standard", "standard", "express", "overnight"})})
		}
	}
}

func (d *shopData) inventory() {
	id := 0
	for wh := 1; wh <= 6; wh++ {
		for pid := 1; pid <= 117; pid++ {
			if d.rng.IntN(3) != 0 {
				continue
			}
			id++
			qty := d.rng.IntN(400)
			reorder := 20 + d.rng.IntN(60)
			status := "in_stock"
			switch {
			case qty == 0:
				status = "out_of_stock"
			case qty < reorder:
				status = "low"
			}
			d.rows["inventory"] = append(d.rows["inventory"], []any{id, wh, pid, qty, reorder,
				ymd(d.date(time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC), 200)), status, fmt.Sprintf("%c%02d-%d", 'A'+rune(wh), d.rng.IntN(50), d.rng.IntN(9))})
		}
	}
}

func (d *shopData) reviews() {
	titles := []string{"Great value", "Not bad", "Disappointing", "Love it", "Would buy again", "Meh"}
	for id := 1; id <= 900; id++ {
		pid := 1 + d.rng.IntN(80)
		rating := 1 + d.rng.IntN(5)
		if pid%7 == 0 && rating < 4 {
			rating += 2 // a few products are loved
		}
		status := "published"
		if d.rng.IntN(15) == 0 {
			status = "hidden"
		}
		d.rows["reviews"] = append(d.rows["reviews"], []any{id, pid, 1 + d.rng.IntN(300), rating, d.pick(titles),
			"Review text " + fmt.Sprint(id), ts(d.clock(d.date(time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC), 700))), status, d.rng.IntN(40)})
	}
}

// eventsTables writes one events_YYYYMMDD table per day from 2024-03-01 to
// 2024-03-14: sessions walk the funnel page_view -> view_item ->
// add_to_cart -> begin_checkout -> purchase and drop out on the way.
func (d *shopData) eventsTables() {
	funnel := []string{"page_view", "view_item", "add_to_cart", "begin_checkout", "purchase"}
	day0 := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 14; i++ {
		day := day0.AddDate(0, 0, i)
		name := "events_" + day.Format("20060102")
		eid := 0
		for s := 0; s < 60+d.rng.IntN(30); s++ {
			session := fmt.Sprintf("s%s-%03d", day.Format("0102"), s)
			var cust any
			if d.rng.IntN(3) > 0 {
				cust = 1 + d.rng.IntN(300)
			}
			device := d.pick([]string{"desktop", "mobile", "mobile", "tablet"})
			source := d.pick(sources)
			var campaign any
			if d.rng.IntN(3) == 0 {
				campaign = d.pick(campaigns)
			}
			t := d.clock(day)
			pid := 1 + d.rng.IntN(110)
			qty := 1 + d.rng.IntN(3)
			for stage, ev := range funnel {
				if stage > 0 && d.rng.IntN(100) < 35 {
					break
				}
				eid++
				t = t.Add(time.Duration(20+d.rng.IntN(300)) * time.Second)
				if t.Day() != day.Day() {
					t = day.Add(86399 * time.Second)
				}
				params := map[string]any{"source": source, "campaign": campaign}
				var value any
				page := "/"
				if stage >= 1 {
					page = fmt.Sprintf("/product/%d", pid)
				}
				if stage >= 2 {
					params["items"] = []map[string]int{{"product_id": pid, "qty": qty}}
					page = "/cart"
				}
				if ev == "purchase" {
					v := round2(d.productPrice[pid] * float64(qty))
					params["value"] = v
					value = v
					page = "/checkout/done"
				}
				d.events[name] = append(d.events[name], []any{eid, ts(t), cust, session, ev, page, device, mustJSON(params), value})
			}
		}
	}
}
