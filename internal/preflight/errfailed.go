package preflight

import (
	"errors"
)

// ErrFailed is what a run returns when a check before its first write failed (a preflight check,
// a refused taint, foreign custom resources under --purge): nothing was changed.
var ErrFailed = errors.New("preflight checks failed")
