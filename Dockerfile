# rtplan image: the package, its dependencies and the shipped checkpoints.
# EXTRAS=gpu installs the CUDA build of JAX (docker-compose.yml builds that one).
FROM python:3.11-slim
ARG EXTRAS=""
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir ".${EXTRAS:+[$EXTRAS]}"
CMD ["rtplan", "demo"]
