package render

import (
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/yaml"
)

// MaxValuesFileSize caps what gpuctl reads of one -f values file (standard input and pipes too; the
// CLI refuses a larger file before reading it): Helm keeps each release, values included, in one
// Secret, and Kubernetes refuses a Secret over 1 MiB (MaxSecretSize, k8s.io/api/core/v1 v0.37.2), so a
// values file ten times that cannot become a release however well it compresses, and reading a huge
// file whole would exhaust memory first.
const MaxValuesFileSize = 10 << 20

func ReadValuesFile(path string) (map[string]any, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("values file: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxValuesFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("values file: %w", err)
	}
	if len(b) > MaxValuesFileSize {
		return nil, fmt.Errorf("values file %s is larger than gpuctl reads (%d MiB): Helm stores a release in one Secret of at most 1 MiB", path, MaxValuesFileSize>>20)
	}
	v := map[string]any{}
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("values file %s: %w", path, err)
	}
	return v, nil
}
