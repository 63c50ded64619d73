{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "streamcrawl.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped base name of every object (50 characters leave room for "-<service>"). */}}
{{- define "streamcrawl.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "streamcrawl.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "streamcrawl.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: streamcrawl
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "name" "frontier") */}}
{{- define "streamcrawl.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamcrawl.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{- define "streamcrawl.image" -}}
{{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end -}}

{{/* The Secret holding accessKey and secretKey. */}}
{{- define "streamcrawl.s3SecretName" -}}
{{- if .Values.s3Credentials.create -}}
{{- printf "%s-s3" (include "streamcrawl.fullname" .) -}}
{{- else -}}
{{- required "s3Credentials.existingSecret must name a Secret with keys accessKey and secretKey (or set s3Credentials.create=true with accessKey and secretKey)" .Values.s3Credentials.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the control plane's apiToken. */}}
{{- define "streamcrawl.apiTokenSecretName" -}}
{{- if .Values.controlApiToken.create -}}
{{- printf "%s-control" (include "streamcrawl.fullname" .) -}}
{{- else -}}
{{- required "controlApiToken.existingSecret must name a Secret with the key apiToken (or set controlApiToken.create=true)" .Values.controlApiToken.existingSecret -}}
{{- end -}}
{{- end -}}

{{/* Settings every service shares (STREAMCRAWL_ prefix), as a name -> string map in YAML. */}}
{{- define "streamcrawl.sharedSettings" -}}
STREAMCRAWL_KAFKA_BOOTSTRAP: {{ .Values.engines.kafkaBootstrap | quote }}
STREAMCRAWL_CASSANDRA_HOSTS: {{ .Values.engines.cassandraHosts | quote }}
STREAMCRAWL_CASSANDRA_PORT: {{ .Values.engines.cassandraPort | quote }}
STREAMCRAWL_CASSANDRA_KEYSPACE: {{ .Values.engines.cassandraKeyspace | quote }}
STREAMCRAWL_CASSANDRA_REPLICATION: {{ .Values.engines.cassandraReplication | quote }}
STREAMCRAWL_CASSANDRA_CONSISTENCY_LEASES: {{ .Values.engines.cassandraConsistency.leases | quote }}
STREAMCRAWL_CASSANDRA_CONSISTENCY_CLAIMS: {{ .Values.engines.cassandraConsistency.claims | quote }}
STREAMCRAWL_CASSANDRA_CONSISTENCY_STATE: {{ .Values.engines.cassandraConsistency.state | quote }}
STREAMCRAWL_CASSANDRA_CONSISTENCY_CONTROL: {{ .Values.engines.cassandraConsistency.control | quote }}
STREAMCRAWL_CASSANDRA_CONSISTENCY_STATS: {{ .Values.engines.cassandraConsistency.stats | quote }}
STREAMCRAWL_CASSANDRA_SERIAL_CONSISTENCY: {{ .Values.engines.cassandraConsistency.serial | quote }}
STREAMCRAWL_KAFKA_REPLICATION_FACTOR: {{ .Values.engines.kafkaReplicationFactor | quote }}
STREAMCRAWL_KAFKA_MIN_INSYNC_REPLICAS: {{ .Values.engines.kafkaMinInsyncReplicas | quote }}
STREAMCRAWL_S3_ENDPOINT: {{ .Values.engines.s3Endpoint | quote }}
STREAMCRAWL_S3_BUCKET: {{ .Values.engines.s3Bucket | quote }}
STREAMCRAWL_S3_SECURE: {{ .Values.engines.s3Secure | quote }}
STREAMCRAWL_S3_REGION: {{ .Values.engines.s3Region | quote }}
STREAMCRAWL_PARTITIONS: {{ .Values.partitions | quote }}
STREAMCRAWL_MIN_DELAY_S: {{ .Values.politeness.minDelayS | quote }}
STREAMCRAWL_DELAY_FACTOR: {{ .Values.politeness.delayFactor | quote }}
STREAMCRAWL_CRAWL_DELAY_CAP_S: {{ .Values.politeness.crawlDelayCapS | quote }}
STREAMCRAWL_BACKOFF_BASE_S: {{ .Values.politeness.backoffBaseS | quote }}
STREAMCRAWL_BACKOFF_CAP_S: {{ .Values.politeness.backoffCapS | quote }}
{{- end -}}

{{/* S3 credentials as env entries, from the Secret named by (dict "root" $ "secret" NAME). */}}
{{- define "streamcrawl.s3Env" -}}
- name: STREAMCRAWL_S3_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: accessKey
- name: STREAMCRAWL_S3_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: secretKey
{{- end -}}

{{/* A name -> value map as env entries, sorted by name. Values become strings; a whole number read from a
values file (a float64 to helm) is written without an exponent: 1000000000, not 1e+09. */}}
{{- define "streamcrawl.envMap" -}}
{{- range $k, $v := . }}
{{- $s := toString $v }}
{{- if and (kindIs "float64" $v) (eq (float64 (int64 $v)) $v) }}{{ $s = toString (int64 $v) }}{{ end }}
- name: {{ $k }}
  value: {{ $s | quote }}
{{- end }}
{{- end -}}

{{/* Pod-level settings every streamcrawl pod shares: pull secrets, security context, scheduling. */}}
{{- define "streamcrawl.podCommon" -}}
{{- $root := .root -}}
automountServiceAccountToken: false
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if and $root.Values.topologySpread.enabled .name }}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: {{ $root.Values.topologySpread.topologyKey }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "streamcrawl.selectorLabels" . | nindent 8 }}
{{- end }}
volumes:
  - name: tmp
    emptyDir: {}
{{- end -}}

{{/* HTTP probes on the named container port: startup and liveness on /healthz, readiness on /readyz. */}}
{{- define "streamcrawl.probes" -}}
{{- $p := .root.Values.probes -}}
startupProbe:
  httpGet: {path: /healthz, port: {{ .port }}}
  periodSeconds: {{ $p.periodSeconds }}
  timeoutSeconds: {{ $p.timeoutSeconds }}
  failureThreshold: {{ $p.startupFailureThreshold }}
livenessProbe:
  httpGet: {path: /healthz, port: {{ .port }}}
  periodSeconds: {{ $p.periodSeconds }}
  timeoutSeconds: {{ $p.timeoutSeconds }}
  failureThreshold: {{ $p.failureThreshold }}
readinessProbe:
  httpGet: {path: /readyz, port: {{ .port }}}
  periodSeconds: {{ $p.periodSeconds }}
  timeoutSeconds: {{ $p.timeoutSeconds }}
  failureThreshold: {{ $p.failureThreshold }}
{{- end -}}

{{/* A PodDisruptionBudget for one component: (dict "root" $ "name" NAME). */}}
{{- define "streamcrawl.pdb" -}}
{{- if .root.Values.podDisruptionBudget.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "streamcrawl.fullname" .root }}-{{ .name }}
  labels:
    {{- include "streamcrawl.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
spec:
  maxUnavailable: {{ .root.Values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "streamcrawl.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}
