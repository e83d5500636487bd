import OpenAI from 'openai';

// The key comes from OPENAI_API_KEY, as usual.
const client = new OpenAI({ baseURL: 'http://127.0.0.1:8080/v1' });
