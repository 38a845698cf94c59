package plan

import (
	"reflect"
	"testing"
)

// FuzzMergeValues builds three values trees from the fuzz bytes and checks the properties of merge that
// the layering relies on: it never panics, gives the same result for the same inputs, never changes or
// shares its inputs, leaves dst alone where src is silent, lets src win where it speaks, has the empty
// map as its identity on the right, and is associative where the layers agree on which paths are maps
// and set no nulls (a null deletes, and a map meeting a scalar replaces, so only then can grouping not
// matter). The seeds run as ordinary test cases.
func FuzzMergeValues(f *testing.F) {
	f.Add([]byte{}, []byte{}, []byte{})
	f.Add([]byte{0, 2, 'a', 3, 1, 'b', 2, 7}, []byte{0, 1, 'a', 0, 1, 'c', 4}, []byte{0, 1, 'a', 5})
	f.Add([]byte{0, 1, 'a', 1, 2, 3, 9, 4}, []byte{0, 1, 'a', 6}, []byte{0, 1, 'b', 0, 0})
	f.Add([]byte{0, 3, 'x', 0, 1, 'y', 3, 1, 'z', 2, 'q', 'a', 2, 'r'}, []byte{0, 1, 'x', 0, 1, 'y', 5}, []byte{0, 1, 'x', 2, 's'})
	f.Fuzz(func(t *testing.T, ab, bb, cb []byte) {
		a, b, c := fuzzMap(ab), fuzzMap(bb), fuzzMap(cb)
		a0, b0 := deepCopy(a), deepCopy(b)

		got := merge(a, b)
		if again := merge(a, b); !reflect.DeepEqual(got, again) {
			t.Fatalf("merge(%v, %v) is not deterministic: %v, then %v", a, b, got, again)
		}
		if !reflect.DeepEqual(a, a0) || !reflect.DeepEqual(b, b0) {
			t.Fatalf("merge changed its inputs: dst %v → %v, src %v → %v", a0, a, b0, b)
		}
		scribble(got)
		if !reflect.DeepEqual(a, a0) || !reflect.DeepEqual(b, b0) {
			t.Fatalf("the result of merge shares maps or lists with its inputs: dst %v → %v, src %v → %v", a0, a, b0, b)
		}

		got = merge(a, b)
		for k, v := range a {
			if _, spoken := b[k]; !spoken && !reflect.DeepEqual(got[k], v) {
				t.Errorf("merge(%v, %v)[%q] = %v, want dst's %v (src does not set it)", a, b, k, got[k], v)
			}
		}
		for k, v := range b {
			_, dstIsMap := a[k].(map[string]any)
			_, srcIsMap := v.(map[string]any)
			switch {
			case v == nil:
				if _, ok := got[k]; ok {
					t.Errorf("merge(%v, %v) keeps %q, which src sets to null", a, b, k)
				}
			case !(dstIsMap && srcIsMap) && !reflect.DeepEqual(got[k], v):
				t.Errorf("merge(%v, %v)[%q] = %v, want src's %v", a, b, k, got[k], v)
			}
		}
		if right := merge(a, map[string]any{}); !reflect.DeepEqual(right, a) {
			t.Errorf("merge(%v, {}) = %v, want dst unchanged", a, right)
		}
		if right := merge(a, nil); !reflect.DeepEqual(right, a) {
			t.Errorf("merge(%v, nil) = %v, want dst unchanged", a, right)
		}

		if !hasNull(b) && !hasNull(c) && shapesAgree(a, b) && shapesAgree(b, c) && shapesAgree(a, c) {
			left, right := merge(merge(a, b), c), merge(a, merge(b, c))
			if !reflect.DeepEqual(left, right) {
				t.Errorf("merge is not associative for a=%v b=%v c=%v: (a∘b)∘c = %v, a∘(b∘c) = %v", a, b, c, left, right)
			}
		}
	})
}

// fuzzMap decodes a values tree from bytes: a small grammar whose keys come from a tiny alphabet, so that
// the three trees of one run collide on keys often.
func fuzzMap(data []byte) map[string]any {
	d := &decoder{data: data}
	m, _ := d.value(0).(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

type decoder struct {
	data []byte
	pos  int
}

func (d *decoder) next() byte {
	if d.pos >= len(d.data) {
		return 0
	}
	b := d.data[d.pos]
	d.pos++
	return b
}

func (d *decoder) value(depth int) any {
	kind := d.next() % 7
	if depth >= 4 && kind <= 1 {
		kind = 4
	}
	switch kind {
	case 0:
		n := int(d.next() % 4)
		m := make(map[string]any, n)
		for range n {
			m[string('a'+rune(d.next()%4))] = d.value(depth + 1)
		}
		return m
	case 1:
		n := int(d.next() % 3)
		l := make([]any, 0, n)
		for range n {
			l = append(l, d.value(depth+1))
		}
		return l
	case 2:
		return string('p' + rune(d.next()%3))
	case 3:
		return float64(d.next() % 5)
	case 4:
		return d.next()%2 == 0
	case 5:
		return nil
	default:
		return "v"
	}
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return clone(m)
}

// scribble changes every map and list in v, so a test can see whether they were shared.
func scribble(v any) {
	switch t := v.(type) {
	case map[string]any:
		for _, x := range t {
			scribble(x)
		}
		t["scribbled"] = true
	case []any:
		for i, x := range t {
			scribble(x)
			t[i] = "scribbled"
		}
	}
}

func hasNull(m map[string]any) bool {
	for _, v := range m {
		if v == nil {
			return true
		}
		if sub, ok := v.(map[string]any); ok && hasNull(sub) {
			return true
		}
	}
	return false
}

// shapesAgree is true when no key path is a map in one tree and something else in the other.
func shapesAgree(a, b map[string]any) bool {
	for k, av := range a {
		bv, ok := b[k]
		if !ok {
			continue
		}
		am, aIsMap := av.(map[string]any)
		bm, bIsMap := bv.(map[string]any)
		if aIsMap != bIsMap {
			return false
		}
		if aIsMap && !shapesAgree(am, bm) {
			return false
		}
	}
	return true
}
