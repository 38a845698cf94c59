package fleet

import "slices"

// Severity orders exit codes from the worst down; the worst of a fleet's codes is its exit code. A
// code not in the list ranks below every listed code but above 0 (success is never worse than
// anything).
type Severity []int

// Worst is the worst of codes by s (0 for none).
func (s Severity) Worst(codes ...int) int {
	worst := 0
	for _, c := range codes {
		if s.rank(c) < s.rank(worst) {
			worst = c
		}
	}
	return worst
}

// rank is c's place in s: lower is worse; unlisted codes rank after every listed one, 0 last.
func (s Severity) rank(c int) int {
	if c == 0 {
		return len(s) + 1
	}
	if i := slices.Index(s, c); i >= 0 {
		return i
	}
	return len(s)
}
