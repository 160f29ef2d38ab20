"""The bounds of every S3 call, in a light module (``serve --help`` shows them without boto3)."""

#: Seconds to connect to S3.
DEFAULT_S3_CONNECT_TIMEOUT = 5.0
#: Seconds S3 may send nothing, once a request is sent, before the attempt fails (a stalled store).
DEFAULT_S3_READ_TIMEOUT = 10.0
#: Attempts of one S3 call, the first included, for timeouts, connection errors and 5xx (backoff with jitter).
DEFAULT_S3_ATTEMPTS = 3
