package dataset

// WithoutGold returns a copy of e without its gold (SQL, result files,
// eval spec): what an agent may see of it. e is unchanged.
func (e *Example) WithoutGold() *Example {
	c := *e
	c.Gold = Gold{}
	return &c
}

// WithoutGold returns a copy of ds for agents: every example without its
// gold, no GoldDir, and no TaskFile (Spider 1.0's and BIRD's task file
// holds the gold SQL). Databases and problems stay shared: they hold no
// gold. ds is unchanged, so the runtime still scores with it. It copies
// every example: build it once per run, not per task.
func (ds *Dataset) WithoutGold() *Dataset {
	out := *ds
	out.GoldDir, out.TaskFile = "", ""
	out.Examples = make([]*Example, len(ds.Examples))
	for i, e := range ds.Examples {
		out.Examples[i] = e.WithoutGold()
	}
	return &out
}
