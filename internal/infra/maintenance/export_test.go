package maintenance

// UnboundSweeps takes the per-batch deadline off p's sweeps: the naive
// variant that TestBackgroundStatementsHaveADeadline must catch.
func UnboundSweeps(p *Purger) { p.deadline = 0 }
