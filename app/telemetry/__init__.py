"""Observers that report on turns without changing them: Prometheus metrics (`metrics`), the request log and
logging set-up (`logs`), the console's health window (`health`) and OpenTelemetry tracing (`tracing`)."""
