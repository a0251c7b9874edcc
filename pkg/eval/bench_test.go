package eval

import (
	"fmt"
	"strings"
	"testing"
)

// bigCSV builds a rows x 4 table of ints, floats and text.
func bigCSV(rows int, shift float64) []byte {
	var b strings.Builder
	b.WriteString("id,amount,name,ratio\n")
	for i := 0; i < rows; i++ {
		fmt.Fprintf(&b, "%d,%.2f,name%d,%g\n", i, float64(i)*1.5+shift, i%97, float64(i)/7)
	}
	return []byte(b.String())
}

func BenchmarkReadCSV100k(b *testing.B) {
	data := bigCSV(100_000, 0)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ReadCSV(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompareTable100k(b *testing.B) {
	pred, _ := ReadCSV(bigCSV(100_000, 0.001))
	gold, _ := ReadCSV(bigCSV(100_000, 0))
	for b.Loop() {
		ok, err := CompareTable(pred, gold, nil, true)
		if err != nil || !ok {
			b.Fatalf("ok %v err %v", ok, err)
		}
	}
}

func BenchmarkAgree10k(b *testing.B) {
	x, _ := ReadCSV(bigCSV(10_000, 0))
	y, _ := ReadCSV(bigCSV(10_000, 0.0001))
	for b.Loop() {
		if !Agree(x, y) {
			b.Fatal("disagree")
		}
	}
}
