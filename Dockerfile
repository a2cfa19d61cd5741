FROM python:3.11-slim
WORKDIR /srv/sundial
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY alembic ./alembic
COPY migrations ./migrations
RUN pip install --no-cache-dir -e . && useradd --system sundial
USER sundial
EXPOSE 8080
CMD ["sundial", "serve"]
