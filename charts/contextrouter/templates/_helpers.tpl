{{/*
Object names. They are fixed, not derived from the release name: the operator
looks up its webhook Service, certificate Secret and webhook configurations by
these names (the same that config/default's namePrefix produces).
*/}}
{{- define "contextrouter.serviceAccountName" -}}contextrouter-controller-manager{{- end -}}
{{- define "contextrouter.webhookServiceName" -}}contextrouter-webhook-service{{- end -}}
{{- define "contextrouter.webhookSecretName" -}}contextrouter-webhook-cert{{- end -}}
{{- define "contextrouter.validatingWebhookName" -}}contextrouter-validating-webhook-configuration{{- end -}}
{{- define "contextrouter.mutatingWebhookName" -}}contextrouter-mutating-webhook-configuration{{- end -}}
{{- define "contextrouter.certificateName" -}}contextrouter-serving-cert{{- end -}}

{{/* Labels of every object. */}}
{{- define "contextrouter.labels" -}}
app.kubernetes.io/name: contextrouter
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: contextrouter
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* Selector of the operator pods; the same as config/manager's, so switching
between the kustomize install and the chart keeps the Deployment. */}}
{{- define "contextrouter.selectorLabels" -}}
app.kubernetes.io/name: contextrouter
control-plane: controller-manager
{{- end -}}

{{/* The operator image: repository@digest, else repository:tag (tag
defaults to the chart's appVersion). */}}
{{- define "contextrouter.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* cert-manager's reference to the serving Certificate, for cainjector. */}}
{{- define "contextrouter.injectCAFrom" -}}
{{- printf "%s/%s" .Release.Namespace (include "contextrouter.certificateName" .) -}}
{{- end -}}

{{/* Where the webhook server reads tls.crt and tls.key when cert-manager
provides them (a Secret volume). Self-managed certificates go to the
operator's default, under the /tmp emptyDir. */}}
{{- define "contextrouter.certManagerCertDir" -}}/etc/contextrouter/webhook-certs{{- end -}}
