package release

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/resource"

	"helm.sh/helm/v4/pkg/kube"
)

// missing names the objects of a deployed revision's manifest that are gone from the cluster (someone
// deleted them: `kubectl delete clusterpolicy`, a namespace's cleanup), as "Kind namespace/name". Such
// a release is not unchanged: an upgrade with the same chart and values recreates them, as `helm
// upgrade` does for any object of the new manifest it cannot find (helm.sh/helm/v4 v4.3.1
// pkg/kube/client.go, update: "Since the resource does not exist, create it").
func (c *Client) missing(manifest string) ([]string, error) {
	infos, err := c.cfg.KubeClient.Build(strings.NewReader(manifest), false)
	if err != nil {
		return nil, fmt.Errorf("read the deployed manifest: %w", err)
	}
	return missingObjects(infos, func(info *resource.Info) error { return info.Get() })
}

// missingObjects are the infos get cannot find.
func missingObjects(infos kube.ResourceList, get func(*resource.Info) error) ([]string, error) {
	var gone []string
	for _, info := range infos {
		err := get(info)
		switch {
		case apierrors.IsNotFound(err):
			gone = append(gone, describe(info))
		case err != nil:
			return nil, fmt.Errorf("read %s: %w", describe(info), err)
		}
	}
	return gone, nil
}

// describe is "Kind namespace/name" (or "Kind name"), as the plan names objects.
func describe(info *resource.Info) string {
	var kind string
	switch {
	case info.Mapping != nil:
		kind = info.Mapping.GroupVersionKind.Kind
	case info.Object != nil:
		kind = info.Object.GetObjectKind().GroupVersionKind().Kind
	}
	if info.Namespace == "" {
		return kind + " " + info.Name
	}
	return kind + " " + info.Namespace + "/" + info.Name
}
