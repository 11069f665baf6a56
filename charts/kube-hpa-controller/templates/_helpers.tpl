{{/*
The image reference.
*/}}
{{- define "khc.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
The active controller's flags: .Values.flags with an empty leader-elect-resource-namespace
meaning the release namespace. Rendered as YAML (read back with fromYaml).
*/}}
{{- define "khc.flags" -}}
{{- $flags := deepCopy (.Values.flags | default dict) }}
{{- if and (hasKey $flags "leader-elect-resource-namespace") (eq (toString (index $flags "leader-elect-resource-namespace")) "") }}
{{- $_ := set $flags "leader-elect-resource-namespace" .Release.Namespace }}
{{- end }}
{{- toYaml $flags }}
{{- end }}

{{/*
The shadow controller's flags: .Values.shadow.flags over its own Lease name over the active
controller's flags.
*/}}
{{- define "khc.shadowFlags" -}}
{{- $base := include "khc.flags" . | fromYaml }}
{{- $flags := merge (deepCopy (.Values.shadow.flags | default dict)) (dict "leader-elect-resource-name" "kube-hpa-controller-shadow") $base }}
{{- toYaml $flags }}
{{- end }}

{{/*
--NAME=VALUE for each flag of a dict, in sorted order; a null value is left out; a whole
number is written without a fraction.
*/}}
{{- define "khc.args" -}}
{{- range $name := keys . | sortAlpha }}
{{- $v := index $ $name }}
{{- if not (kindIs "invalid" $v) }}
{{- if and (kindIs "float64" $v) (eq $v (floor $v)) }}
{{- $v = int64 $v }}
{{- end }}
- {{ printf "--%s=%v" $name $v | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The namespace of the Lease of a flag dict: the controller's default, kube-system, when unset.
*/}}
{{- define "khc.leaseNamespace" -}}
{{- $ns := index . "leader-elect-resource-namespace" }}
{{- if kindIs "invalid" $ns }}kube-system{{ else }}{{ $ns }}{{ end }}
{{- end }}

{{/*
The secure port of a flag dict (10257 when unset).
*/}}
{{- define "khc.securePort" -}}
{{- $p := index . "secure-port" }}
{{- if kindIs "invalid" $p }}10257{{ else }}{{ int64 $p }}{{ end }}
{{- end }}

{{/*
A pod template. Argument: dict with root, name, serviceAccount, args (list of strings),
resources, priorityClassName, affinity, port.
*/}}
{{- define "khc.podTemplate" -}}
{{- $root := .root -}}
metadata:
  labels: {app.kubernetes.io/name: {{ .name }}}
spec:
  serviceAccountName: {{ .serviceAccount }}
  {{- with .priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile: {type: RuntimeDefault}
  {{- with .affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: kube-hpa-controller
      image: {{ include "khc.image" $root }}
      {{- with $root.Values.image.pullPolicy }}
      imagePullPolicy: {{ . }}
      {{- end }}
      args:
        {{- toYaml .args | nindent 8 }}
      env:
        # Where this replica's /debug is reached, written on its member Lease with --shards.
        - name: POD_IP
          valueFrom: {fieldRef: {fieldPath: status.podIP}}
      ports:
        - {name: https, containerPort: {{ .port }}, protocol: TCP}
      livenessProbe:
        httpGet: {path: /healthz, port: https, scheme: HTTPS}
        initialDelaySeconds: 10
        periodSeconds: 10
        failureThreshold: 3
      readinessProbe:
        httpGet: {path: /readyz, port: https, scheme: HTTPS}
        periodSeconds: 5
      {{- with .resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities: {drop: ["ALL"]}
{{- end }}
