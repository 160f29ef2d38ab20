"""The client data plane: parallel, verified HTTP transfers to and from presigned URLs.

Object bytes cross one seam, ``transport.ObjectTransport.exchange`` (one request and its answer: method,
URL, headers, a body from memory or a file range, a bound on the answer, a sink for the expected body,
per-attempt timeouts). It has two implementations, libcurl (``curl.py``) and aiohttp (``aio.py``),
chosen once by ``choice.open_transport``: libcurl for every object to or from storage's presigned
URLs; aiohttp under a global rate limit and for peers (a channel whose objects go through its own
server, the simple protocol, brings its own aiohttp transport). Above the seam, once for both:
verification of size and hash, retries with backoff, bounds and error mapping (``http.py``), ranged
downloads (``ranges.py``), multipart uploads (``multipart.py``), URL refresh (``mover.py``), peers
(``peers.py``) and the progress watchdog (``watchdog.py``).
"""
