package dataset

import (
	"reflect"
	"testing"
)

// TestWithoutGold: the view has no gold anywhere an agent could reach it,
// keeps everything else, and leaves the dataset it was made from intact
// (the coordinator scores with it).
func TestWithoutGold(t *testing.T) {
	t.Parallel()
	ds, err := Load("../../examples/demo", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.GoldDir == "" || len(ds.Examples) == 0 {
		t.Fatalf("the demo loaded with GoldDir %q and %d examples", ds.GoldDir, len(ds.Examples))
	}
	withGold := 0
	for _, e := range ds.Examples {
		if e.Gold.SQL != "" && len(e.Gold.Results) > 0 && e.Gold.HasSpec {
			withGold++
		}
	}
	if withGold == 0 {
		t.Fatal("no demo example has gold SQL, results and spec: the test would prove nothing")
	}
	before := make([]Example, len(ds.Examples))
	for i, e := range ds.Examples {
		before[i] = *e
	}
	goldDir, taskFile := ds.GoldDir, ds.TaskFile

	v := ds.WithoutGold()
	if v.GoldDir != "" || v.TaskFile != "" {
		t.Errorf("view: GoldDir %q, TaskFile %q, want both empty", v.GoldDir, v.TaskFile)
	}
	if len(v.Examples) != len(ds.Examples) {
		t.Fatalf("view has %d examples, the dataset %d", len(v.Examples), len(ds.Examples))
	}
	for i, e := range v.Examples {
		if !reflect.DeepEqual(e.Gold, Gold{}) {
			t.Errorf("view example %s keeps gold %+v", e.ID, e.Gold)
		}
		if byID, ok := v.Example(e.ID); !ok || !reflect.DeepEqual(byID.Gold, Gold{}) {
			t.Errorf("view.Example(%s): found %v, gold %+v", e.ID, ok, byID.Gold)
		}
		want := before[i]
		want.Gold = Gold{}
		if !reflect.DeepEqual(*e, want) {
			t.Errorf("view example %s = %+v, want the original less its gold %+v", e.ID, *e, want)
		}
		if _, ok := v.Database(e); !ok {
			t.Errorf("view example %s: its database is not found", e.ID)
		}
		if v.Runnable(e.ID) != ds.Runnable(e.ID) {
			t.Errorf("view example %s: runnable %v, dataset %v", e.ID, v.Runnable(e.ID), ds.Runnable(e.ID))
		}
	}
	if ds.GoldDir != goldDir || ds.TaskFile != taskFile {
		t.Errorf("the dataset changed: GoldDir %q, TaskFile %q", ds.GoldDir, ds.TaskFile)
	}
	for i, e := range ds.Examples {
		if !reflect.DeepEqual(*e, before[i]) {
			t.Errorf("dataset example %s changed: %+v, was %+v", e.ID, *e, before[i])
		}
	}
}
