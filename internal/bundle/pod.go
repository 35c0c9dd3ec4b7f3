package bundle

import (
	"encoding/hex"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/contextrouter/contextrouter/internal/digest"
)

// ConfigMapName is the name of the ConfigMap holding a router's bundle.
func ConfigMapName(router string) string { return router + "-bundle" }

// ServeArgs are the arguments of the router container (the image's
// entrypoint is the contextrouter binary).
func ServeArgs() []string {
	return []string{"serve", "-f", MountDir, "--secrets-dir", SecretsDir, "--cache-dir", CacheDir, "--expand-env=false"}
}

// Volumes returns what a pod serving the bundle mounts: the bundle ConfigMap
// (configMapName), a writable cache and /tmp, every Secret the bundle reads
// and every Directory source's volume. Everything but the writable folders is
// mounted read-only.
//
// Secret and ConfigMap volumes are optional: a missing one fails only the
// sources that read it (each reports why), never the whole pod.
func (b *Bundle) Volumes(configMapName string) ([]corev1.Volume, []corev1.VolumeMount) {
	vols := []corev1.Volume{
		{Name: "bundle", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMapName},
			Items:                []corev1.KeyToPath{{Key: DataKey, Path: DataKey}},
		}}},
		{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: "bundle", MountPath: MountDir, ReadOnly: true},
		{Name: "cache", MountPath: CacheDir},
		{Name: "tmp", MountPath: TmpDir},
	}
	for _, s := range b.Secrets {
		name := VolumeName("secret-", s)
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: s, Optional: ptr.To(true),
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: path.Join(SecretsDir, s), ReadOnly: true})
	}
	// Sources sharing one volume at one path share one mount.
	mounted := make(map[string]bool)
	for _, d := range b.Directories {
		if mounted[d.MountPath] {
			continue
		}
		mounted[d.MountPath] = true
		name := VolumeName("source-", d.Source)
		v := corev1.Volume{Name: name}
		if d.ConfigMap != "" {
			v.ConfigMap = &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: d.ConfigMap}, Optional: ptr.To(true),
			}
		} else {
			v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: d.ClaimName, ReadOnly: true}
		}
		vols = append(vols, v)
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: d.MountPath, ReadOnly: true})
	}
	return vols, mounts
}

// VolumeName makes a pod volume name (a DNS-1123 label) from a prefix and an
// object name, which may be longer or hold dots. Names that do not fit get a
// hash suffix, so two objects never share a volume name.
func VolumeName(prefix, name string) string {
	if n := prefix + name; len(validation.IsDNS1123Label(n)) == 0 {
		return n
	}
	sum := digest.SHA256(name)
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	s := strings.ReplaceAll(name, ".", "-")
	if max := validation.DNS1123LabelMaxLength - len(prefix) - len(suffix); len(s) > max {
		s = s[:max]
	}
	return prefix + strings.TrimRight(s, "-") + suffix
}
