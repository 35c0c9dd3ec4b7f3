package v1alpha1

import (
	"fmt"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	staleActions    = []StaleAction{StaleFlag, StaleDrop}
	auditQueryTexts = []AuditQueryText{AuditQueryOmit, AuditQueryHash, AuditQueryFull}
	// freshSourceTypes are the types whose chunks have a content time.
	freshSourceTypes = []SourceType{SourceDirectory, SourceGitRepo, SourceHTTPAPI}
)

// validateFreshness checks spec.freshness of a defaulted ContextSource.
// Inline text is part of the configuration and has no age of its own; tool
// catalogs are not chunks.
func validateFreshness(p *field.Path, s *ContextSourceSpec) field.ErrorList {
	f := s.Freshness
	if f == nil {
		return nil
	}
	var allErrs field.ErrorList
	if !slices.Contains(freshSourceTypes, s.Type) {
		allErrs = append(allErrs, field.Forbidden(p, fmt.Sprintf("freshness applies to Directory, GitRepo and HTTPAPI sources only (type is %s)", s.Type)))
	}
	if f.MaxAge.Duration <= 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("maxAge"), f.MaxAge.Duration.String(), "must be greater than 0"))
	}
	return append(allErrs, validateEnum(p.Child("staleAction"), f.StaleAction, staleActions)...)
}

// validateAudit checks spec.audit of a defaulted ContextRouter.
func validateAudit(p *field.Path, a *AuditSpec) field.ErrorList {
	if a == nil {
		return nil
	}
	var allErrs field.ErrorList
	if _, ok := a.Rate(); !ok {
		allErrs = append(allErrs, field.Invalid(p.Child("sampleRate"), a.SampleRate,
			`must be a decimal number from 0 to 1, such as "0.1" (one delivery in ten)`))
	}
	return append(allErrs, validateEnum(p.Child("queryText"), a.QueryText, auditQueryTexts)...)
}

// Rate is SampleRate as a number; ok is false when it is not a decimal from
// 0 to 1.
func (a *AuditSpec) Rate() (rate float64, ok bool) {
	if !validFraction(a.SampleRate) {
		return 0, false
	}
	rate, _ = strconv.ParseFloat(a.SampleRate, 64)
	return rate, true
}

// Default fills the audit block's marker defaults. It is idempotent.
func (a *AuditSpec) Default() {
	if a == nil {
		return
	}
	setDefault(&a.SampleRate, "1")
	setDefault(&a.QueryText, AuditQueryOmit)
}

// Default fills the freshness block's marker defaults. It is idempotent.
func (f *FreshnessSpec) Default() {
	if f == nil {
		return
	}
	setDefault(&f.StaleAction, StaleFlag)
}
