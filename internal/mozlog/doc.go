// Package mozlog builds the services' structured logger: JSON lines with
// MozLog's field names (Timestamp in ns, Type, Logger, Hostname, Severity
// as a syslog level, Pid, EnvVersion, Fields), the format Mozilla's push
// service logs in and that its operators' pipelines parse.
//
// It must never log a secret itself, nor import a tier.
package mozlog
