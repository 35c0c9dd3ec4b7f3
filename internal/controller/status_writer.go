package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// patchStatusLocked writes a status that several writers share (a route's
// status.parents, a source's status.excludedBy): change edits obj's status
// and reports whether it changed anything; the merge patch carries obj's
// resourceVersion, so a concurrent write makes it fail instead of being
// overwritten, and then obj is read again from live and change runs again on
// the fresh object. A deleted object is not an error.
func patchStatusLocked[T client.Object](ctx context.Context, c client.Client, live client.Reader, obj T, change func(T) bool) error {
	key := client.ObjectKeyFromObject(obj)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		before := obj.DeepCopyObject().(T)
		if !change(obj) {
			return nil
		}
		err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			if gerr := live.Get(ctx, key, obj); gerr != nil {
				return gerr
			}
		}
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patch status of %T %s: %w", obj, key, err)
	}
	return nil
}
