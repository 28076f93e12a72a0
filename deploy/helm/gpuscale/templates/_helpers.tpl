{{/*
Object name prefix. Release "gpuscale" -> "gpuscale" (Services gpuscale-agent, gpuscale-gateway, the names
examples/ and the docs use). A release whose name contains the chart name is used as it is; any other
release R gives "R-gpuscale". fullnameOverride replaces the whole prefix.
*/}}
{{- define "gpuscale.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gpuscale.agent.fullname" -}}{{ include "gpuscale.fullname" . }}-agent{{- end -}}
{{- define "gpuscale.agent.headless" -}}{{ include "gpuscale.fullname" . }}-agent-headless{{- end -}}
{{- define "gpuscale.gateway.fullname" -}}{{ include "gpuscale.fullname" . }}-gateway{{- end -}}
{{/* The gateway's GPU node selector: gateway.gpuNodes.selector, else agent.nodeSelector as a label
selector (the nodes an agent should run on), else "" (GPU capacity decides). */}}
{{- define "gpuscale.gateway.gpuNodeSelector" -}}
{{- if .Values.gateway.gpuNodes.selector -}}
{{- .Values.gateway.gpuNodes.selector -}}
{{- else -}}
{{- $parts := list -}}
{{- range $k, $v := .Values.agent.nodeSelector -}}
{{- $parts = append $parts (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}
{{- end -}}
{{- define "gpuscale.rightsize.fullname" -}}{{ include "gpuscale.fullname" . }}-rightsize{{- end -}}
{{- define "gpuscale.tls.secretName" -}}
{{- if .Values.tls.certManager.enabled -}}{{ include "gpuscale.fullname" . }}-tls{{- else -}}{{ .Values.tls.existingSecret }}{{- end -}}
{{- end -}}

{{/* The agent Service's in-cluster DNS name (.svc and fully qualified). */}}
{{- define "gpuscale.agent.svc" -}}{{ include "gpuscale.agent.fullname" . }}.{{ .Release.Namespace }}.svc{{- end -}}
{{- define "gpuscale.agent.fqdn" -}}{{ include "gpuscale.agent.svc" . }}.{{ .Values.clusterDomain }}{{- end -}}
{{- define "gpuscale.gateway.fqdn" -}}{{ include "gpuscale.gateway.fullname" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}{{- end -}}

{{- define "gpuscale.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Labels common to every object. */}}
{{- define "gpuscale.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpuscale
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/*
Selector labels. app.kubernetes.io/name is gpuscale-agent / gpuscale-gateway whatever the release name:
examples/prometheus/scrape-config.yaml keeps pods by that label.
*/}}
{{- define "gpuscale.agent.selectorLabels" -}}
app.kubernetes.io/name: gpuscale-agent
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{/* The AMD agent DaemonSet's own selector (agentAmd): disjoint from the NVIDIA one's. */}}
{{- define "gpuscale.agentAmd.selectorLabels" -}}
app.kubernetes.io/name: gpuscale-agent-amd
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{/* The agent Services' pod selector: the pods of both agent DaemonSets (NVIDIA and AMD). */}}
{{- define "gpuscale.agent.podSelector" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}
{{- define "gpuscale.gateway.selectorLabels" -}}
app.kubernetes.io/name: gpuscale-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "gpuscale.rightsize.selectorLabels" -}}
app.kubernetes.io/name: gpuscale-rightsize
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Flags every long-running container gets: logging and profiles. */}}
{{- define "gpuscale.commonArgs" -}}
- --log-format={{ .Values.logFormat }}
- --log-level={{ .Values.logLevel }}
{{- if .Values.profiles }}
- --profiles=/etc/gpuscale/profiles.yaml
{{- end }}
{{- end -}}

{{/* Listener TLS flags (agent and gateway). */}}
{{- define "gpuscale.listenerTLSArgs" -}}
{{- if .Values.tls.enabled }}
- --tls-cert=/tls/tls.crt
- --tls-key=/tls/tls.key
- --tls-ca=/tls/ca.crt
{{- if .Values.tls.requireClientCert }}
- --tls-require-client-cert
{{- end }}
{{- end }}
{{- end -}}

{{/* Container securityContext: no privilege escalation, no capabilities, read-only root filesystem. */}}
{{- define "gpuscale.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Probes: native gRPC health without TLS, HTTP /readyz with TLS; liveness always /healthz. */}}
{{- define "gpuscale.probes" -}}
{{- $p := .probes -}}
readinessProbe:
{{- if .tls }}
  httpGet:
    path: /readyz
    port: metrics
{{- else }}
  grpc:
    port: 6000
{{- end }}
  initialDelaySeconds: {{ $p.readiness.initialDelaySeconds }}
  periodSeconds: {{ $p.readiness.periodSeconds }}
  failureThreshold: {{ $p.readiness.failureThreshold }}
  timeoutSeconds: 2
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
  initialDelaySeconds: {{ $p.liveness.initialDelaySeconds }}
  periodSeconds: {{ $p.liveness.periodSeconds }}
  failureThreshold: {{ $p.liveness.failureThreshold }}
  timeoutSeconds: 2
{{- end -}}

{{- define "gpuscale.validate" -}}
{{- if and .Values.tls.enabled (not .Values.tls.certManager.enabled) (not .Values.tls.existingSecret) -}}
{{- fail "tls.enabled needs tls.existingSecret (a Secret with tls.crt, tls.key, ca.crt) or tls.certManager.enabled" -}}
{{- end -}}
{{- if and .Values.tls.enabled .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) -}}
{{- fail "tls.certManager.enabled needs tls.certManager.issuerRef.name (the Issuer or ClusterIssuer that signs gpuscale's certificate)" -}}
{{- end -}}
{{- if and .Values.rightsize.enabled (not .Values.rightsize.prometheusUrl) -}}
{{- fail "rightsize.enabled needs rightsize.prometheusUrl (the Prometheus that scrapes the agents)" -}}
{{- end -}}
{{- end -}}
