package dataset

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestLoadedGoldAndLookupsMatchTheFolder: the gold files Load attaches
// from its one listing of the gold folder are GoldFiles' for each example
// (single and variants, in name order), and Example finds every example
// by id through Load's index, and still after Examples changed.
func TestLoadedGoldAndLookupsMatchTheFolder(t *testing.T) {
	t.Parallel()
	const demo = "../../examples/demo"
	ds, err := Load(demo, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Examples) < 10 {
		t.Fatalf("the demo has %d examples", len(ds.Examples))
	}
	result := filepath.Join(ds.GoldDir, "exec_result")
	variants := 0
	for _, e := range ds.Examples {
		files, single, err := GoldFiles(result, e.ID)
		if err != nil {
			files = nil
		}
		if !slices.Equal(e.Gold.Results, files) || e.Gold.Single != single && len(files) > 0 {
			t.Errorf("%s: loaded gold %v (single %v), GoldFiles %v (single %v)", e.ID, e.Gold.Results, e.Gold.Single, files, single)
		}
		if len(files) > 1 {
			variants++
		}
		got, ok := ds.Example(e.ID)
		if !ok || got != e {
			t.Errorf("Example(%s) = %v, %v; want the loaded example", e.ID, got, ok)
		}
	}
	if variants == 0 {
		t.Fatal("no demo example has several gold variants: the test checks nothing of their order")
	}
	if _, ok := ds.Example("no-such-example"); ok {
		t.Error("Example found an id the dataset does not have")
	}
	// Examples reordered and cut after Load: lookups follow the slice.
	first, last := ds.Examples[0], ds.Examples[len(ds.Examples)-1]
	ds.Examples = []*Example{last}
	if got, ok := ds.Example(last.ID); !ok || got != last {
		t.Errorf("after Examples changed, Example(%s) = %v, %v", last.ID, got, ok)
	}
	if got, ok := ds.Example(first.ID); ok {
		t.Errorf("after Examples changed, Example(%s) found %v, which is no longer in it", first.ID, got)
	}
}
