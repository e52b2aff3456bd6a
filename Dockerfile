# One Debian 12 image for web, worker, beat and the testbed. Debian's python3-gfal2 only fits Debian's
# Python 3.11, so the venv is made from it with --system-site-packages (see shared/notes).
FROM debian:bookworm-slim

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GFAL_PYTHONBIN=/usr/bin/python3

RUN apt-get update && apt-get install -y --no-install-recommends \
        python3 python3-venv ca-certificates openssl \
        gfal2 gfal2-plugin-file gfal2-plugin-http gfal2-plugin-xrootd gfal2-plugin-mock python3-gfal2 \
        gfal2-util-scripts python3-gfal2-util \
        xrootd-server xrootd-server-plugins xrootd-plugins xrootd-client xrootd-client-plugins xrootd-scitokens-plugins \
        nginx libnginx-mod-http-dav-ext iperf3 iputils-tracepath \
        libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 fonts-liberation \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt ./
RUN /usr/bin/python3 -m venv --system-site-packages /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir -r requirements.txt
ENV PATH=/opt/venv/bin:$PATH

COPY . .
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput -v 0

EXPOSE 8000
CMD ["gunicorn", "portal.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "16", "--access-logfile", "-"]
