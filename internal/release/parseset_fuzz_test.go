package release

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseSet feeds --set expressions to ParseSet: it must never panic, must give the same answer for
// the same input, and what it accepts must be plain data that Helm can marshal into a release. The
// seeds run as ordinary test cases (go test), the fuzzer explores from them (go test -fuzz).
func FuzzParseSet(f *testing.F) {
	for _, seed := range []string{
		"driver.enabled=false",
		"a.b=c,d[0]=e",
		"toolkit.env[0].name=CONTAINERD_CONFIG,toolkit.env[0].value=/etc/containerd/config.toml",
		"node-feature-discovery.worker.tolerations[1].key=nvidia.com/gpu",
		`a=b\,c`,
		"a={x,y}",
		"a=null",
		"=x",
		"a[0][1]=b",
		"a[65536]=x",
		"a.b[0]=1,a.b[0].c=2",
		"a[0]=1,a[0].b=2",
		"a.=b",
		"a[",
		"a]=b",
		"a[-1]=b",
		"",
		",,,",
		"a.b.c.d.e.f.g.h=1\nb=2",
	} {
		f.Add(seed, "")
	}
	f.Add("a.b=1", "a.b.c=2")
	f.Add("list[0]=x", "list[2]=y")
	f.Fuzz(func(t *testing.T, first, second string) {
		exprs := []string{first}
		if second != "" {
			exprs = append(exprs, second)
		}
		got, err := ParseSet(exprs)
		again, errAgain := ParseSet(exprs)
		if (err == nil) != (errAgain == nil) {
			t.Fatalf("ParseSet(%q) is not deterministic: %v, then %v", exprs, err, errAgain)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--set ") {
				t.Errorf("ParseSet(%q) error %q does not name the expression", exprs, err)
			}
			return
		}
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("ParseSet(%q) is not deterministic: %v, then %v", exprs, got, again)
		}
		if got == nil {
			t.Fatalf("ParseSet(%q) = nil map without an error", exprs)
		}
		if _, err := json.Marshal(got); err != nil {
			t.Errorf("ParseSet(%q) = %v, which does not marshal: %v", exprs, got, err)
		}
	})
}
