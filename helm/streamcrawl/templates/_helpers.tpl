{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "streamcrawl.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped base name for every object. */}}
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

{{- define "streamcrawl.s3SecretName" -}}
{{- .Values.s3Credentials.existingSecret | default (printf "%s-s3" (include "streamcrawl.fullname" .)) -}}
{{- end -}}

{{/* Engine settings (ConfigMap) and S3 credentials (Secret) as container env. */}}
{{- define "streamcrawl.engineEnv" -}}
envFrom:
  - configMapRef:
      name: {{ include "streamcrawl.fullname" . }}-engines
env:
  - name: STREAMCRAWL_S3_ACCESS_KEY
    valueFrom:
      secretKeyRef:
        name: {{ include "streamcrawl.s3SecretName" . }}
        key: accessKey
  - name: STREAMCRAWL_S3_SECRET_KEY
    valueFrom:
      secretKeyRef:
        name: {{ include "streamcrawl.s3SecretName" . }}
        key: secretKey
{{- end -}}

{{/*
A worker Deployment (frontier, fetcher, parser, dedup, recrawl): (dict "root" $ "name" "frontier").
Its probes fetch the loopback-only metrics endpoint from inside the container.
*/}}
{{- define "streamcrawl.workerDeployment" -}}
{{- $root := .root -}}
{{- $svc := index $root.Values.services .name -}}
{{- if $svc.enabled }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "streamcrawl.fullname" $root }}-{{ .name }}
  labels:
    {{- include "streamcrawl.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
spec:
  replicas: {{ $svc.replicas }}
  selector:
    matchLabels:
      {{- include "streamcrawl.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "streamcrawl.selectorLabels" . | nindent 8 }}
      annotations:
        checksum/engines: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
    spec:
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: 60
      containers:
        - name: {{ .name }}
          image: {{ include "streamcrawl.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command:
            {{- toYaml $svc.command | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          {{- include "streamcrawl.engineEnv" $root | nindent 10 }}
            - name: {{ $svc.metricsPortEnv }}
              value: {{ $svc.metricsPort | quote }}
            {{- range $k, $v := $svc.env }}
            - name: {{ $k }}
              value: {{ $v | quote }}
            {{- end }}
          livenessProbe:
            exec:
              command: ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:{{ $svc.metricsPort }}/metrics', timeout=4)"]
            initialDelaySeconds: {{ $root.Values.probes.initialDelaySeconds }}
            periodSeconds: {{ $root.Values.probes.periodSeconds }}
            timeoutSeconds: {{ $root.Values.probes.timeoutSeconds }}
            failureThreshold: {{ $root.Values.probes.failureThreshold }}
          readinessProbe:
            exec:
              command: ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:{{ $svc.metricsPort }}/metrics', timeout=4)"]
            initialDelaySeconds: 5
            periodSeconds: {{ $root.Values.probes.periodSeconds }}
            timeoutSeconds: {{ $root.Values.probes.timeoutSeconds }}
          resources:
            {{- toYaml $svc.resources | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
      volumes:
        - name: tmp
          emptyDir: {}
{{- end }}
{{- end -}}
