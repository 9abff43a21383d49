# rtplan image: the package and its CPU dependencies (`pip install .[gpu]` for CUDA JAX).
FROM python:3.11-slim
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir .
CMD ["rtplan", "demo"]
