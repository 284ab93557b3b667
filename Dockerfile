# The server image: one image, three roles (npm start | npm run server | npm run worker).
FROM node:24-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY tsconfig.json kysely.config.ts ./
COPY src ./src
COPY workers ./workers
COPY migrations ./migrations
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000
USER node
EXPOSE 3000
CMD ["npm", "run", "server"]
