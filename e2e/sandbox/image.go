package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry/remote"
)

// PushImage pushes a tiny image to the sandbox's registry (Options.Registry) under repository
// ("nvidia/driver"), tagged with each of tags: an empty image config and one small layer, in an OCI
// image manifest. It is enough for a tag list or a manifest lookup, not to run. Driver images take
// NVIDIA's precompiled tags, driverimage.PrecompiledTag (NVIDIA/gpu-operator
// api/nvidia/v1alpha1/nvidiadriver_types.go GetPrecompiledImagePath@v26.7.0).
func (c *Cluster) PushImage(ctx context.Context, repository string, tags ...string) error {
	if c.RegistryHost == "" {
		return errors.New("the sandbox runs no registry: start it with Options.Registry")
	}
	if len(tags) == 0 {
		return errors.New("no tag to push")
	}
	repo, err := remote.NewRepository(c.RegistryHost + "/" + repository)
	if err != nil {
		return err
	}
	repo.PlainHTTP = true
	config := []byte("{}")
	layer := []byte("gpuctl sandbox image " + repository + "\n")
	configDesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageConfig, config)
	layerDesc := content.NewDescriptorFromBytes(ocispec.MediaTypeImageLayer, layer)
	for _, b := range []struct {
		desc ocispec.Descriptor
		data []byte
	}{{configDesc, config}, {layerDesc, layer}} {
		if err := repo.Push(ctx, b.desc, bytes.NewReader(b.data)); err != nil {
			return fmt.Errorf("push %s blob: %w", repository, err)
		}
	}
	manifest, err := oras.PackManifest(ctx, repo, oras.PackManifestVersion1_1, "", oras.PackManifestOptions{
		ConfigDescriptor: &configDesc,
		Layers:           []ocispec.Descriptor{layerDesc},
	})
	if err != nil {
		return fmt.Errorf("push %s manifest: %w", repository, err)
	}
	for _, tag := range tags {
		if err := repo.Tag(ctx, manifest, tag); err != nil {
			return fmt.Errorf("tag %s:%s: %w", repository, tag, err)
		}
	}
	return nil
}
